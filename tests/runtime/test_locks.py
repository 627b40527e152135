"""building(folder): one holder at a time, so concurrent first uses of a cache build once and then load."""

import threading

from pglab.runtime.locks import building


def test_a_second_builder_waits_until_the_first_leaves(tmp_path):
    folder = tmp_path / "cache" / "agent-x"
    entered, order = threading.Event(), []

    def second():
        with building(folder):
            order.append("second")
            entered.set()

    with building(folder):
        order.append("first")
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not entered.wait(0.3)                 # blocked while the first holds the lock, however slow the host
        order.append("first done")
    waiter.join(timeout=60)
    assert entered.is_set() and order == ["first", "first done", "second"]
    assert (tmp_path / "cache" / ".agent-x.lock").is_file() and not folder.exists()


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    folder = tmp_path / "agent-y"
    try:
        with building(folder):
            raise RuntimeError("build failed")
    except RuntimeError:
        pass
    done = threading.Event()

    def again():
        with building(folder):
            done.set()

    threading.Thread(target=again).start()
    assert done.wait(60)


def test_build_once_builds_once_leaves_nothing_on_failure_and_rebuilds_when_forced(tmp_path):
    from pglab.runtime.locks import build_once

    folder, calls = tmp_path / "model-a", []

    def build(tmp):
        calls.append(tmp)
        (tmp / "weights").write_text(str(len(calls)))
        (tmp / "done.json").write_text("{}")

    def broken(tmp):
        (tmp / "weights").write_text("half")
        raise RuntimeError("out of memory")

    try:
        build_once(folder, broken, "done.json")
    except RuntimeError:
        pass
    assert not folder.exists() and [p.name for p in tmp_path.iterdir()] == [".model-a.lock"]
    assert build_once(folder, build, "done.json") == folder and build_once(folder, build, "done.json") == folder
    assert len(calls) == 1 and (folder / "weights").read_text() == "1"
    build_once(folder, build, "done.json", force=True)
    assert len(calls) == 2 and (folder / "weights").read_text() == "2"
