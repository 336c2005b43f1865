"""The image tests leave the host as they found it: the local registry their fixtures start (tests/image_parts.py)
is taken down when the test that needed it skips after it came up (enroot missing: no ../shared/thirdparty),
not left serving its state in /tmp."""

from __future__ import annotations

import os

import pytest

from image_parts import registry_script, registry_session, registry_up, worker_port

pytestmark = pytest.mark.slow
PORT = 5617  # its own: no other module's registry


def up(port: int) -> bool:
    return registry_script("status", port).returncode == 0


def test_a_skip_after_the_registry_came_up_takes_it_down() -> None:
    port = worker_port(PORT)
    assert not up(port), f"a registry already serves 127.0.0.1:{port}"
    with pytest.raises(pytest.skip.Exception):
        with registry_up(PORT) as reg:
            pid = reg.pid()
            assert up(port) and os.path.exists(f"/proc/{pid}")
            pytest.skip("enroot not built here")  # what enroot_env() does without ../shared/thirdparty
    assert not up(port) and not os.path.exists(f"/proc/{pid}") and not reg.state.exists()


def test_a_fixture_generator_closed_before_its_end_takes_it_down() -> None:
    port = worker_port(PORT)
    gen = registry_session(PORT)
    reg = next(gen)
    pid = reg.pid()
    assert up(port)
    gen.close()  # a fixture's generator abandoned between its yield and its teardown
    assert not up(port) and not os.path.exists(f"/proc/{pid}") and not reg.state.exists()
