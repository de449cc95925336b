"""The auth flows of the service, one module each, listed in ``registry.py``."""
