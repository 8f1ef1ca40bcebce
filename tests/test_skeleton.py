import memory_server


def test_version_is_a_release_string():
    major, minor, patch = memory_server.__version__.split(".")
    assert all(part.isdigit() for part in (major, minor, patch))
