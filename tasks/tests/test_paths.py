import pytest

from tasks.paths import TaskFileError, normalize_path, validate_files


@pytest.mark.parametrize("path", ["a.txt", "dir/sub/file.csv", "reward/check.py", ".hidden", "a b/c d.md", "ünï.txt"])
def test_accepts_relative_normalised_paths(path):
    assert normalize_path(path) == path


@pytest.mark.parametrize(
    "path, problem",
    [
        ("", "empty path"),
        ("/etc/passwd", "absolute"),
        ("../escape.txt", "'..'"),
        ("a/../../b", "'..'"),
        ("a\x00b", "NUL"),
        ("a\nb", "control character"),
        ("a\\..\\b", "backslash"),
        ("a//b", "not normalised"),
        ("./a", "not normalised"),
        ("a/", "not normalised"),
        (".", "names no file"),
        ("caf\udce9.txt", "not UTF-8 text"),  # the byte 0xe9 of a Latin-1 name, as the OS or tarfile decode it
        ("\ud800.txt", "not UTF-8 text"),  # a lone surrogate sent as JSON "\\ud800"
        ("/".join(["d"] * 66), "nested more than 64 deep"),
    ],
)
def test_refuses_unsafe_paths_with_a_clear_message(path, problem):
    with pytest.raises(TaskFileError) as err:
        normalize_path(path)
    assert problem in str(err.value)


def test_limits_name_the_file(settings):
    settings.CLAWGYM_MAX_FILE_BYTES = 10
    settings.CLAWGYM_MAX_FILES_PER_TASK = 3
    settings.CLAWGYM_MAX_TASK_BYTES = 25
    with pytest.raises(TaskFileError, match="'big.bin'.*over the limit of 10 bytes"):
        validate_files([("input", "ok.txt", b"x"), ("input", "big.bin", b"x" * 11)])
    with pytest.raises(TaskFileError, match="'d.txt'.*more than 3 files"):
        validate_files([("input", f"{n}.txt", b"x") for n in "abcd"])
    with pytest.raises(TaskFileError, match="'c.txt'.*total more than 25 bytes"):
        validate_files([("input", f"{n}.txt", b"x" * 10) for n in "abc"])
    with pytest.raises(TaskFileError, match="listed twice"):
        validate_files([("input", "a.txt", b""), ("input", "a.txt", b"")])
    # The same path in two roles is two files (an input and its expected final state).
    validate_files([("input", "a.txt", b""), ("solution", "a.txt", b"")])
