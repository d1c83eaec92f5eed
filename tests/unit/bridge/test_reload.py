"""What a reload changes in the OPC UA users (daemon/bridge/opcua_access.py `Users.replace`)."""

from __future__ import annotations

from daemon.bridge.opcua_access import Refusals, Users


def test_replacing_users_reports_added_and_revoked_and_serves_the_new_ones() -> None:
    users = Users({"plc": "a", "scada": "b", "old": "c"}, Refusals())
    added, revoked = users.replace({"plc": "a", "scada": "new", "hmi": "d"})
    assert added == {"hmi"} and revoked == {"scada", "old"}  # a new password revokes the old sessions too
    assert users.get_user(None, "hmi", "d") is not None
    assert users.get_user(None, "scada", "b") is None
    assert users.get_user(None, "old", "c") is None
    assert users.get_user(None, "plc", "a") is not None
