"""lib.docs_testing's tutorial walker: it runs a page's sh blocks in order in one shell, fails with the output when a
command fails, and fails when a line a test stands in for is no longer on the page."""

import pytest

from lib.docs_testing import script_of, sh_blocks, walk

PAGE = """# A page

```sh
make demo
GREETING=hello
```

Text between the blocks, and a block of another language that is not run:

```python
raise SystemExit(1)
```

```sh
echo "$GREETING from $(basename "$PWD")"
```
"""


def test_the_sh_blocks_run_in_order_in_one_shell(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert len(sh_blocks(page)) == 2
    (tmp_path / "checkout").mkdir()
    walked = walk(page, tmp_path / "checkout", env={}, stand_ins={"make demo": "a fixture"})
    assert walked.stdout == "hello from checkout\n"
    assert "# make demo: a fixture" in walked.script
    assert (tmp_path / "checkout" / "manage.py").is_symlink() and (tmp_path / "checkout" / "var").is_dir()


def test_a_failing_command_fails_the_walk_with_its_output(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace('echo "$GREETING', 'echo before; false; echo "$GREETING'))
    with pytest.raises(AssertionError, match="(?s)failed \\(exit 1\\).*before"):
        walk(page, tmp_path, env={}, stand_ins={"make demo": "a fixture"})


def test_a_stand_in_whose_line_left_the_page_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace("make demo", "make run"))
    with pytest.raises(AssertionError, match="no longer has the line 'make demo'"):
        script_of(page, {"make demo": "a fixture"})
