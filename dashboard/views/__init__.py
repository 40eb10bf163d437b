"""The dashboard pages, one module per page group."""
