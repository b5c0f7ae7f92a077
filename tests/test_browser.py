"""A real browser against JupyterLab, in a 1280x800 window with the file browser open: notebook 02
runs top to bottom in headless Chromium; the ``lab.KeySetExplorer()`` widget of its section 10
renders, reacts to its controls (a dtype change says the key set stays the same), and survives
save, kernel shutdown and reopen (no "Error displaying widget", the saved view is shown); no output
of 02 and no markdown table of 05 is clipped: wide content scrolls inside its cell.

The recipe is the one in the project notes ("A real browser against JupyterLab"): JupyterLab on a
free loopback port with throwaway settings, workspaces, runtime, data and config folders (no token,
no news, no update checks, no autosave, every cell in the page, widget state saved with the notebook
as ``make lab`` sets it), Debian's Chromium driven by Playwright's sync API, no network beyond
127.0.0.1. The server's root is a temporary folder holding copies of the notebooks: the files in the
repository are only read.

Skips (with a one-line reason) without Chromium or the playwright package; CI installs both. The
screenshot lands in ``build/screenshots/explorer.png``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/02_keys_and_key_sets.ipynb"
WIDE_TABLES = "notebooks/05_codegen.ipynb"  # the widest markdown tables of the course
VIEWPORT = {"width": 1280, "height": 800}
SCREENSHOT = REPO / "build" / "screenshots" / "explorer.png"

CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
    # Belt and braces with the request blocking below: no host name resolves except loopback.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]
# Any network request that does not go to the loopback interface (aborted and reported).
NOT_LOOPBACK = re.compile(r"^(https?|wss?|ftp)://(?!(127\.0\.0\.1|localhost|\[::1\])(:\d+)?/)")

SERVER_START_TIMEOUT = 60.0
PAGE_TIMEOUT = 60.0
RUN_TIMEOUT = 120.0
WIDGET_TIMEOUT = 20.0


# ---------------------------------------------------------------------------- requirements


def _chromium_path() -> str | None:
    """Chromium found on PATH (Debian's ``chromium``, or ``chromium-browser`` elsewhere): a PATH
    without it is a machine without it."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium's path, or a skip (the test needs a real browser and Playwright to drive it)."""
    path = _chromium_path()
    if path is None:
        pytest.skip("no Chromium (chromium or chromium-browser on PATH); CI installs it: apt-get install chromium")
    if importlib.util.find_spec("playwright") is None:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    return path


# ---------------------------------------------------------------------------- the JupyterLab server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url: str, method: str = "GET", timeout: float = 5.0) -> bytes:
    request = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError as exc:
        return f"(no log: {exc})"


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the kernels run in sessions of their own, outside its group)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


class LabServer:
    """``python -m jupyterlab`` on 127.0.0.1, with every Jupyter folder in ``home``."""

    def __init__(self, home: Path, root: Path = REPO) -> None:
        self.home = home
        self.root = root
        self.log_path = home / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""
        dirs = {name: home / name for name in ("settings", "workspaces", "runtime", "data", "config", "ipython")}
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        settings = {
            # Every cell stays in the page (the default windowing drops off-screen cells).
            "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
            "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
            # Saving is the test's own step (of a copy), never a timer's.
            "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
            # What `make lab` turns on app-wide (Makefile, LAB_OVERRIDES): a saved notebook keeps the
            # widgets' state, so it reopens without "Error displaying widget: model not found".
            "@jupyter-widgets/jupyterlab-manager/plugin": {"saveState": True},
        }
        for plugin, values in settings.items():
            target = dirs["settings"] / f"{plugin}.jupyterlab-settings"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values))
        self.env = dict(os.environ)
        self.env.update(
            JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
            JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            IPYTHONDIR=str(dirs["ipython"]),
            # The kernelspec says "python": jupyter_client maps it to the server's interpreter (this
            # venv); the PATH entry is for anything a kernel starts by name.
            PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        )
        for name in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTERLAB_DIR"):
            self.env.pop(name, None)

    def command(self, port: int) -> list[str]:
        return [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            "--ServerApp.port_retries=0", "--allow-root", "--IdentityProvider.token=", "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True", "--LabApp.expose_app_in_browser=True",
            f"--ServerApp.root_dir={self.root}", "--LabApp.extension_manager=readonly",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            # Opening a notebook makes a checkpoint: keep it out of the repository.
            f"--FileCheckpoints.checkpoint_dir={self.home / 'checkpoints'}",
        ]  # fmt: skip

    def start(self) -> None:
        """Start and wait for ``/api/status``; a port taken in the meantime gets another try."""
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        for _attempt in range(3):
            port = _free_port()
            self.url = f"http://127.0.0.1:{port}"
            with open(self.log_path, "ab") as log:
                log_start = log.tell()
                self.proc = subprocess.Popen(
                    self.command(port), cwd=self.root, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            last = "no answer yet"
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    status = json.loads(_http(f"{self.url}/api/status", timeout=2))
                    if "started" in status:
                        return
                    last = repr(status)
                except (OSError, ValueError) as exc:
                    last = repr(exc)
                time.sleep(0.25)
            else:
                raise AssertionError(
                    f"JupyterLab did not answer {self.url}/api/status within {SERVER_START_TIMEOUT:.0f} s "
                    f"(last: {last}); log tail:\n{_tail(self.log_path)}"
                )
            log_text = self.log_path.read_bytes()[log_start:].decode(errors="replace")
            if "already in use" not in log_text:
                raise AssertionError(f"JupyterLab exited with {self.proc.returncode}; log tail:\n{log_text[-3000:]}")
        raise AssertionError(f"JupyterLab found no free port in 3 tries; log tail:\n{_tail(self.log_path)}")

    def stop(self) -> None:
        """Shut the kernels down, then end the server's process group and any leftover kernel."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(Exception):
                for kernel in json.loads(_http(f"{self.url}/api/kernels", timeout=3)):
                    _http(f"{self.url}/api/kernels/{kernel['id']}", method="DELETE", timeout=5)
        leftovers = {pid: _cmdline(pid) for pid in _children(proc.pid)}
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        for pid, cmdline in leftovers.items():
            if cmdline is not None and _cmdline(pid) == cmdline:  # still the process we started
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.proc = None


@pytest.fixture(scope="module")
def lab_server(chromium, tmp_path_factory):
    root = tmp_path_factory.mktemp("lab-root")
    for name in (NOTEBOOK, WIDE_TABLES):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, root / name)
    # However the course's own tables change, one table in the copy of 05 is surely wider than a cell.
    copy = json.loads((root / WIDE_TABLES).read_text())
    copy["cells"].append({"cell_type": "markdown", "id": "browser-test-wide-table", "metadata": {}, "source": (
        "| frame | generated file |\n|---|---|\n"
        + "".join(f"| `at::_ops::add_Tensor::call_{i}` | `torch/csrc/autograd/generated/{'x' * 200}_{i}.cpp` |\n"
                  for i in range(3))
    )})  # fmt: skip
    (root / WIDE_TABLES).write_text(json.dumps(copy))
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"), root)
    try:
        server.start()
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------- the page

# The notebook panel's state, as plain data (also what a failure message shows).
STATE_JS = """(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return {phase: 'no window.jupyterapp yet'};
  const panels = Array.from(app.shell.widgets('main'));
  const w = panels.find(p => p.context && p.context.path === path) || app.shell.currentWidget;
  if (!w || !w.content || !w.sessionContext || !w.context || w.context.path !== path)
    return {phase: 'notebook not open', current: w ? w.title.label : null, panels: panels.map(p => p.title.label)};
  const session = w.sessionContext.session;
  const kernel = session ? session.kernel : null;
  const cells = w.content.widgets;
  const code = cells.filter(c => c.model.type === 'code');
  const errors = [];
  cells.forEach((c, i) => {
    if (c.model.type !== 'code') return;
    for (let j = 0; j < c.model.outputs.length; j++) {
      const out = c.model.outputs.get(j).toJSON();
      if (out.output_type === 'error') errors.push(`cell ${i}: ${out.ename}: ${out.evalue}`);
    }
  });
  return {
    phase: 'notebook', current: app.shell.currentWidget === w, ready: w.context.isReady,
    kernel: kernel ? kernel.status : null, kernel_name: kernel ? kernel.name : null,
    code_cells: code.length, executed: code.filter(c => c.model.executionCount !== null).length,
    run_all: window.__labRunAll || null, dirty: w.context.model.dirty, errors,
  };
}"""

RUN_ALL_JS = """async (path) => {
  const app = window.jupyterapp;
  const w = Array.from(app.shell.widgets('main')).find(p => p.context && p.context.path === path);
  app.shell.activateById(w.id);
  await app.commands.execute('notebook:clear-all-cell-outputs');
  window.__labRunAll = 'running';
  app.commands.execute('notebook:run-all-cells').then(
    ok => { window.__labRunAll = ok ? 'done' : 'done, with a failure'; },
    err => { window.__labRunAll = 'failed: ' + err; });
}"""

# Which interpreter the notebook's kernel runs (a silent request: no execution count, no output cell).
KERNEL_PREFIX_JS = """async (path) => {
  const app = window.jupyterapp;
  const w = Array.from(app.shell.widgets('main')).find(p => p.context && p.context.path === path);
  const future = w.sessionContext.session.kernel.requestExecute(
    {code: 'import sys; print(sys.prefix)', silent: false, store_history: false});
  let text = '';
  future.onIOPub = msg => { if (msg.header.msg_type === 'stream') text += msg.content.text; };
  await future.done;
  return text.trim();
}"""

# Content of a notebook's outputs and rendered markdown that is cut off instead of readable: an
# element whose own overflow hides part of it, or one that reaches past its cell's right edge with no
# scrolling box (overflow-x auto/scroll) in between. Also reports the widest content that does
# scroll, so a test can check it looked at something wide. Widget controls are left out (their
# labels are ellipsized by design); the explorer's HTML output is checked.
OVERFLOW_JS = """(path) => {
  const app = window.jupyterapp;
  const w = Array.from(app.shell.widgets('main')).find(p => p.context && p.context.path === path);
  const problems = [];
  let checked = 0, widest = null;
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  w.content.widgets.forEach((cell, i) => {
    const node = cell.node, cellBox = node.getBoundingClientRect();
    const inside = node.querySelectorAll('.jp-OutputArea-output *, .jp-RenderedMarkdown *');
    for (const el of inside) {
      if (el.closest('.widget-hbox, .widget-dropdown, .widget-checkbox')) continue;
      const box = el.getBoundingClientRect();
      if (box.width === 0 || box.height === 0) continue;
      checked++;
      let scroller = null;
      for (let a = el.parentElement; a && a !== node; a = a.parentElement) if (scrolls(a)) { scroller = a; break; }
      const what = `cell ${i}: <${el.tagName.toLowerCase()} class="${String(el.className.baseVal ?? el.className).slice(0, 60)}"> "${(el.textContent || '').trim().slice(0, 50)}"`;
      const ox = getComputedStyle(el).overflowX;
      if ((ox === 'hidden' || ox === 'clip') && el.scrollWidth > el.clientWidth + 1 && el.tagName !== 'svg')
        problems.push(`${what}: ${el.scrollWidth}px of content in a ${el.clientWidth}px box with overflow-x ${ox}`);
      const limit = scroller ? scroller.getBoundingClientRect() : cellBox;
      if (box.right > limit.right + 1 && !scroller)
        problems.push(`${what}: right edge ${Math.round(box.right)} past the cell's ${Math.round(cellBox.right)}`);
      if (scroller && limit.right > cellBox.right + 1)
        problems.push(`${what}: its scrolling box ends at ${Math.round(limit.right)}, past the cell's ${Math.round(cellBox.right)}`);
      if (scroller && el.tagName === 'TABLE' && (!widest || box.width > widest.width))
        widest = {cell: i, width: Math.round(box.width), box: scroller.clientWidth, scrollable: scroller.scrollWidth > scroller.clientWidth};
    }
  });
  const left = document.querySelector('#jp-left-stack');
  return {checked, problems: problems.slice(0, 15), widest, cells: w.content.widgets.length,
          sidebar: left ? Math.round(left.getBoundingClientRect().width) : 0, window: window.innerWidth};
}"""

SAVE_JS = """async (path) => {
  const app = window.jupyterapp;
  const w = Array.from(app.shell.widgets('main')).find(p => p.context && p.context.path === path);
  await w.context.save();
  return w.context.model.dirty;
}"""

# Shut the kernel down and close the tab, as a learner ending the day does; the reopened notebook
# gets a new kernel, which knows none of the old widget models.
CLOSE_JS = """async (path) => {
  const app = window.jupyterapp;
  const w = Array.from(app.shell.widgets('main')).find(p => p.context && p.context.path === path);
  await w.sessionContext.shutdown();
  w.dispose();
  return true;
}"""


class Page:
    """A Playwright page on the notebook, with bounded waits that explain themselves."""

    def __init__(self, page, blocked: list[str], path: str = NOTEBOOK) -> None:
        self.page = page
        self.blocked = blocked
        self.path = path
        self.last_state: object = None

    def state(self) -> dict:
        try:
            self.last_state = self.page.evaluate(STATE_JS, self.path)
        except Exception as exc:  # navigation in progress, page crashed: keep polling, report it
            self.last_state = {"phase": f"evaluate failed: {type(exc).__name__}: {str(exc)[:200]}"}
        return self.last_state  # type: ignore[return-value]

    def excerpt(self, n: int = 1500) -> str:
        try:
            text = self.page.locator("body").inner_text(timeout=5000)
        except Exception as exc:
            return f"(no page text: {exc})"
        return re.sub(r"\n\s*\n+", "\n", text)[-n:]

    def fail(self, what: str, timeout: float, detail: str = "") -> None:
        pytest.fail(
            f"{what}: not within {timeout:.0f} s. {detail}\nlast notebook state: {self.last_state}\n"
            f"blocked non-loopback requests: {self.blocked[:5]}\npage text (end):\n{self.excerpt()}",
            pytrace=False,
        )

    def wait_state(self, what: str, done, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            if state.get("phase") == "notebook" and state.get("errors"):
                pytest.fail(f"a cell failed while waiting for {what}: {state['errors']}", pytrace=False)
            if done(state):
                return state
            time.sleep(0.25)
        self.fail(what, timeout)
        raise AssertionError  # unreachable: pytest.fail raises

    def wait_text(self, locator, what: str, done, timeout: float = WIDGET_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                text = locator.inner_text(timeout=1000)
                if done(text):
                    return text
            time.sleep(0.2)
        self.state()
        self.fail(what, timeout, f"last text: {text[:600]!r}")
        raise AssertionError


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


# ---------------------------------------------------------------------------- the test


def _open(nb: Page, url: str, what: str) -> dict:
    nb.page.goto(f"{url}/lab/tree/{nb.path}?reset", wait_until="domcontentloaded", timeout=30_000)
    state = nb.wait_state(
        what, lambda s: s.get("phase") == "notebook" and s.get("ready") and s.get("kernel") == "idle", PAGE_TIMEOUT
    )
    nb.page.evaluate("async () => { await window.jupyterapp.commands.execute('filebrowser:activate'); }")
    return state


def _no_clipping(nb: Page, what: str) -> dict:
    nb.page.wait_for_timeout(500)  # layout settles after the sidebar opens
    report = nb.page.evaluate(OVERFLOW_JS, nb.path)
    assert report["window"] == VIEWPORT["width"] and report["sidebar"] >= 200, report
    assert report["checked"] > 50, f"{what}: too little content checked: {report}"
    assert report["problems"] == [], f"{what}: content cut off at {VIEWPORT['width']} px:\n" + "\n".join(
        report["problems"]
    )
    return report


def test_keyset_explorer_in_jupyterlab(chromium, lab_server, tmp_path):
    from playwright.sync_api import sync_playwright

    notebook_file = REPO / NOTEBOOK
    before = hashlib.sha256(notebook_file.read_bytes()).hexdigest()
    blocked: list[str] = []
    console_errors: list[str] = []
    started = time.monotonic()

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
            viewport=VIEWPORT, timeout=30_000, service_workers="block",
        )  # fmt: skip
        try:

            def block(route) -> None:
                blocked.append(route.request.url)
                route.abort()

            context.route(NOT_LOOPBACK, block)
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(15_000)
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            nb = Page(page, blocked)

            # 1. Open (a copy of) the notebook in a fresh workspace, file browser open; wait for its kernel.
            state = _open(nb, lab_server.url, "the notebook to open with an idle kernel")
            assert state["kernel_name"] == "python3", state
            assert state["code_cells"] > 10, state

            # 2. Clear the stored outputs (their execution counts too), run every cell, wait for all.
            page.evaluate(RUN_ALL_JS, NOTEBOOK)
            state = nb.wait_state(
                "every code cell to run (Run All)",
                lambda s: (
                    s.get("run_all") == "done"
                    and s.get("kernel") == "idle"
                    and s.get("executed") == s.get("code_cells")
                ),
                RUN_TIMEOUT,
            )
            kernel_prefix = page.evaluate(KERNEL_PREFIX_JS, NOTEBOOK)
            assert Path(kernel_prefix).resolve() == Path(sys.prefix).resolve(), (
                f"the kernel runs {kernel_prefix!r}, not this environment ({sys.prefix})"
            )

            # 3. The explorer rendered as a live widget, with its controls and key set.
            explorer = page.locator(".lab-explorer")
            nb.wait_text(explorer.first, "the KeySetExplorer widget to render", lambda t: "guards" in t)
            assert explorer.count() == 1, f"{explorer.count()} explorers in the page (expected the one of section 10)"
            explorer.scroll_into_view_if_needed()
            assert explorer.evaluate("e => e.closest('.jupyter-widgets') !== null || e.matches('.jupyter-widgets')")
            for selector, least in ((".widget-dropdown select", 2), (".widget-checkbox input[type=checkbox]", 10),
                                    (".widget-html", 3), (".lab-explorer-output .lab-explorer-keyset", 1)):  # fmt: skip
                found = explorer.locator(selector).count()
                assert found >= least, f"{found} '{selector}' in the explorer, expected at least {least}"
            widget_errors = page.get_by_text(re.compile("Error displaying widget|Failed to create view")).count()
            assert widget_errors == 0, f"widget errors in the page:\n{nb.excerpt()}"

            title = explorer.locator(".lab-explorer-keyset .lab-keyset-title")
            row = explorer.locator(".lab-explorer-keyset .lab-explorer-row")
            assert "DispatchKeySet(CPU, AutogradCPU)" in title.inner_text(), title.inner_text()
            assert "table row: AutogradCPU: myadd_autograd" in row.inner_text(), row.inner_text()

            # 4. The dtype dropdown: the key set stays the same, and the explorer says so (and why).
            change = explorer.locator(".lab-explorer-output .lab-explorer-change")
            assert change.count() == 0, "a change note before anything changed"
            explorer.locator(".lab-explorer-dtype select").select_option("float64")
            nb.wait_text(
                change, "the explorer to report the dtype change",
                lambda t: "dtype float32 → float64" in t and "same key set DispatchKeySet(CPU, AutogradCPU)" in t
                and "dtype is not a dispatch key" in t,
            )  # fmt: skip
            assert "DispatchKeySet(CPU, AutogradCPU)" in title.inner_text(), title.inner_text()

            # 5. The device dropdown: cpu -> meta turns AutogradCPU into AutogradMeta.
            explorer.locator(".lab-explorer-device select").select_option("meta")
            nb.wait_text(
                title, "the key set to follow device=meta", lambda t: "DispatchKeySet(Meta, AutogradMeta)" in t
            )
            nb.wait_text(row, "the table row to follow device=meta", lambda t: "AutogradMeta: myadd_autograd" in t)
            nb.wait_text(change, "the change note to follow device=meta", lambda t: "device cpu → meta" in t)

            # 6. A guard checkbox: AutoDispatchBelowAutograd excludes the autograd keys -> Meta kernel.
            guard = explorer.locator(".lab-explorer-guard-autodispatchbelowautograd input[type=checkbox]")
            guard.click()
            assert guard.is_checked()
            nb.wait_text(title, "the key set to follow the guard", lambda t: "DispatchKeySet(Meta)" in t)
            nb.wait_text(row, "the table row to follow the guard", lambda t: "table row: Meta: myadd_meta" in t)
            guard.click()
            nb.wait_text(row, "the table row to follow the guard's removal", lambda t: "AutogradMeta:" in t)

            # 7. At 1280 px with the file browser open, no output of 02 is cut off.
            _no_clipping(nb, NOTEBOOK)

            # 8. A picture of the cell holding the explorer.
            cell = page.locator(".jp-Cell", has=explorer)
            cell.scroll_into_view_if_needed()
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            cell.screenshot(path=str(SCREENSHOT), timeout=15_000)
            final = nb.state()

            # 9. Save, shut the kernel down, close; reopen with a new kernel: the explorer's cell shows
            # the saved view (the widget's last state), not "Error displaying widget: model not found".
            assert page.evaluate(SAVE_JS, NOTEBOOK) is False
            saved = json.loads((lab_server.root / NOTEBOOK).read_text())
            assert "application/vnd.jupyter.widget-state+json" in saved["metadata"].get("widgets", {}), (
                "the saved notebook holds no widget state"
            )
            page.evaluate(CLOSE_JS, NOTEBOOK)
            state = _open(nb, lab_server.url, "the saved notebook to reopen with a new kernel")
            assert state["executed"] == state["code_cells"], state  # the saved outputs, not re-run
            reopened = page.locator(".lab-explorer .lab-explorer-keyset")
            nb.wait_text(  # the view as saved: after the last change (the guard's removal)
                reopened.first, "the saved explorer view after reopening",
                lambda t: "guards AutoDispatchBelowAutograd → (none)" in t, timeout=30,
            )  # fmt: skip
            page.wait_for_timeout(1000)  # a late "model not found" would replace the view
            widget_errors = page.get_by_text(re.compile("Error displaying widget|Failed to create view")).count()
            assert widget_errors == 0, f"after reopening, widget errors in the page:\n{nb.excerpt()}"
            assert "DispatchKeySet(Meta, AutogradMeta)" in reopened.first.inner_text()

            # 10. The markdown tables of 05 (the widest of the course, plus one surely wider than a cell)
            # scroll inside their cells at 1280 px: nothing reaches past a cell or is cut off.
            wide = Page(page, blocked, WIDE_TABLES)
            _open(wide, lab_server.url, f"{WIDE_TABLES} to open")
            report = _no_clipping(wide, WIDE_TABLES)
            assert report["widest"] and report["widest"]["scrollable"], (
                f"expected a table wider than its cell in {WIDE_TABLES}, scrolling inside it: {report}"
            )
            assert report["widest"]["width"] > report["widest"]["box"] + 200, report
            assert report["widest"]["cell"] == report["cells"] - 1, f"the test's own wide table was not the widest: {report}"
        finally:
            context.close()

    width, height = _png_size(SCREENSHOT)
    assert SCREENSHOT.stat().st_size > 20_000 and width >= 600 and height >= 300, (
        f"screenshot too small: {SCREENSHOT.stat().st_size} bytes, {width}x{height}"
    )
    assert final.get("errors") == [], final
    assert hashlib.sha256(notebook_file.read_bytes()).hexdigest() == before, f"{NOTEBOOK} was modified"
    print(
        f"\nscreenshot: {SCREENSHOT} ({width}x{height}); {state['code_cells']} code cells run; widest table of "
        f"{WIDE_TABLES}: {report['widest']}; {time.monotonic() - started:.1f} s in the browser; "
        f"blocked requests: {blocked or 'none'}; console errors: {len(console_errors)}"
    )
