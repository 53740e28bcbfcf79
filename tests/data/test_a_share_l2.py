"""The A-share Level-2 snapshot reader (quantgym.data.a_share_l2): on the real files of
the maintainers' raw a_share_l2 folder (not shipped; those tests skip without it) and on the shipped extract."""

import numpy as np
import pandas as pd
import pytest

from quantgym.data import a_share_l2
from quantgym.data.a_share_l2 import CONTINUOUS, SNAPSHOT_FILES, continuous_mask, data_dir, read_snapshots

# rows and symbols of each file (a_share_l2/PROVENANCE.md)
EXPECTED = {
    "szse_20220601": (20_980, {"000400.SZ", "300122.SZ", "300274.SZ", "300288.SZ", "300918.SZ"}, "2022-06-01"),
    "sse_20211201": (32_972, 30, "2021-12-01"),
    "sse_600519_20230201": (5_109, {"600519.SH"}, "2023-02-01"),
}


@pytest.mark.shared_data("a_share_l2")
@pytest.mark.parametrize("file", sorted(SNAPSHOT_FILES))
def test_snapshot_files_read_into_the_tidy_book_table(file):
    rows, symbols, day = EXPECTED[file]
    df = read_snapshots(file)
    assert len(df) == rows
    assert (set(df["symbol"]) == symbols) if isinstance(symbols, set) else (df["symbol"].nunique() == symbols)
    assert list(df.columns[:6]) == ["ts_event", "symbol", "phase", "continuous", "last_px", "volume"]
    assert [c for c in df.columns if c.startswith("bid_px_")] == [f"bid_px_{i:02d}" for i in range(10)]
    local = pd.to_datetime(df["ts_event"], utc=True).dt.tz_convert("Asia/Shanghai")
    assert (local.dt.strftime("%Y-%m-%d") == day).all()
    c = df[df["continuous"]]
    assert len(c) > 0.9 * rows
    # continuous trading: both sides present, never crossed, prices on the 0.01 grid, sizes in shares
    assert c["bid_px_00"].notna().all() and c["ask_px_00"].notna().all()
    assert (c["bid_px_00"] < c["ask_px_00"]).all()
    px = c[[f"{s}_px_{i:02d}" for s in ("bid", "ask") for i in range(10)]].to_numpy()
    px = px[np.isfinite(px)]
    assert np.abs(px * 100 - np.rint(px * 100)).max() < 1e-6
    sz = df[[f"bid_sz_{i:02d}" for i in range(10)]].to_numpy()
    assert sz.dtype == np.int64 and sz.min() >= 0
    # an empty level: NaN price, size 0
    empty = df["bid_px_09"].isna().to_numpy()
    assert (df["bid_sz_09"].to_numpy()[empty] == 0).all()
    # within one symbol, time never goes backwards
    assert df.groupby("symbol")["ts_event"].apply(lambda x: bool((np.diff(x) >= 0).all())).all()


@pytest.mark.shared_data("a_share_l2")
def test_szse_values_and_session_filter():
    df = read_snapshots("szse_20220601", symbols=["300274.SZ"])
    assert set(df["symbol"]) == {"300274.SZ"} and len(df) == 4_919
    assert len(read_snapshots("szse_20220601", symbols=["300122.SZ"])) == 4_906  # docs/market_bench.md v2
    row = df[df["ts_event"] == int(pd.Timestamp("2022-06-01 11:06:30", tz="Asia/Shanghai").value)]
    one = read_snapshots("szse_20220601", symbols=["000400.SZ"])
    r2 = one[one["ts_event"] == int(pd.Timestamp("2022-06-01 11:06:30", tz="Asia/Shanghai").value)].iloc[0]
    # the raw row: BuyPrice1 19.32 x 8,200, SellPrice1 19.33 x 16,700, SellPrice7 19.40 x 400
    assert (r2["bid_px_00"], r2["bid_sz_00"], r2["ask_px_00"], r2["ask_sz_00"]) == (19.32, 8200, 19.33, 16700)
    assert (r2["ask_px_06"], r2["ask_sz_06"], r2["last_px"], r2["phase"]) == (19.40, 400, 19.33, "3")
    assert len(row) == 1
    tod = (df["ts_event"] - int(pd.Timestamp("2022-06-01", tz="Asia/Shanghai").value)) / 1e9
    cont = df["continuous"].to_numpy()
    assert (tod[cont] >= 9.5 * 3600).all() and (tod[cont] < 14 * 3600 + 57 * 60).all()
    assert not ((tod[cont] > 11.5 * 3600) & (tod[cont] < 13 * 3600)).any()  # no lunch-break rows
    assert CONTINUOUS[0] == ("09:30:00", "11:30:00", True)
    ts = np.array([pd.Timestamp(f"2022-06-01 {t}", tz="Asia/Shanghai").value for t in
                   ("09:29:59", "09:30:00", "11:30:00", "11:30:03", "13:00:00", "14:56:59", "14:57:00")])
    assert continuous_mask(ts, "2022-06-01").tolist() == [False, True, True, False, True, True, False]


def test_missing_folder_and_bad_arguments_are_one_line_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError) as exc:
        data_dir(tmp_path / "nowhere")
    msg = str(exc.value)
    assert "\n" not in msg and "data_dir=" in msg and a_share_l2.ENV_VAR in msg
    assert "dolphindb/Tutorials_CN" in msg  # where to get the files
    monkeypatch.setenv(a_share_l2.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError):
        read_snapshots("szse_20220601")
    # without a folder, the shipped extract covers only its two stocks, and says so
    with pytest.raises(FileNotFoundError, match=r"ships szse_20220601 for 300274.SZ, 300122.SZ only"):
        read_snapshots("szse_20220601", symbols=["000400.SZ"])
    with pytest.raises(ValueError, match="unknown snapshot file"):
        read_snapshots("nope")


@pytest.mark.shared_data("a_share_l2")
def test_unknown_symbol_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"symbols \['999999.SZ'\] not in"):
        read_snapshots("szse_20220601", symbols=["999999.SZ"])


def test_shipped_pair_extract_is_served_without_a_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(a_share_l2.ENV_VAR, str(tmp_path / "nowhere"))
    pair = read_snapshots("szse_20220601", symbols=["300274.SZ", "300122.SZ"])
    assert len(pair) == 4_919 + 4_906 and set(pair["symbol"]) == {"300274.SZ", "300122.SZ"}
    one = read_snapshots("szse_20220601", symbols=["300122.SZ"])
    assert len(one) == 4_906 and one.index.tolist() == list(range(4_906))
    # the same columns, dtypes and values as the reader's output
    assert list(pair.columns[:6]) == ["ts_event", "symbol", "phase", "continuous", "last_px", "volume"]
    assert pair["ts_event"].dtype == np.int64 and pair["bid_sz_00"].dtype == np.int64
    c = pair[pair["continuous"]]
    assert (c["bid_px_00"] < c["ask_px_00"]).all()


@pytest.mark.shared_data("a_share_l2")
def test_shipped_pair_extract_equals_the_zip():
    name, symbols = a_share_l2.BUNDLED_SNAPSHOTS["szse_20220601"]
    shipped = pd.read_parquet(a_share_l2.BUNDLED_DIR / name)
    from_zip = read_snapshots("szse_20220601", path=data_dir(), symbols=list(symbols))
    pd.testing.assert_frame_equal(shipped, from_zip)
