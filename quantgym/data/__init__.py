"""Data readers and the bundled (packaged) data of quantgym."""
