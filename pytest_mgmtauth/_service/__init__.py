"""The domain: the fake auth service in pure Python (no pytest, no HTTP)."""
