"""Stand-ins for third-party services the tests cannot reach from our machines (the model hub, AWS S3)
and a tiny model writer: importable as `stand_ins` (pytest.ini puts tests/ on the path). Each module
says in its first lines what it stands in for and why. Nothing here ships in a role."""
