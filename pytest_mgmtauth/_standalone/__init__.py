"""``mgmtauth-server``: the fake as a process, for clients in any language.

``server`` holds :class:`StandaloneServer` (one ``MgmtServer`` at a time on one socket),
``control`` its control API under ``/_mgmtauth/`` (``messages`` reading its requests and
the JSON it answers), ``cli`` the command line. Internal: the public face is the
``mgmtauth-server`` command (docs/standalone.md).
"""
