"""Testing helpers and the pytest plugin for accuracy-drop gates."""
