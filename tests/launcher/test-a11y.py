#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The launcher through AT-SPI, as a screen reader sees it: every control a user can act on
(buttons, toggles, check and radio buttons, text and spin entries, drop-downs, switches) has a
name, in English and with LANGUAGE=de; with LANGUAGE=de the window's labels are German.

Usage (under xvfb-run and dbus-run-session): test-a11y.py BUILD_ROOT
"""
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import gi

    gi.require_version("Atspi", "2.0")
    from gi.repository import Atspi
except (ImportError, ValueError) as e:
    print(f"1..0 # SKIP no AT-SPI bindings (python3-gi, gir1.2-atspi-2.0): {e}")
    sys.exit(77)

ACTIONABLE = {
    Atspi.Role.PUSH_BUTTON, Atspi.Role.TOGGLE_BUTTON, Atspi.Role.CHECK_BOX, Atspi.Role.RADIO_BUTTON,
    Atspi.Role.TEXT, Atspi.Role.ENTRY, Atspi.Role.PASSWORD_TEXT, Atspi.Role.SPIN_BUTTON,
    Atspi.Role.COMBO_BOX, Atspi.Role.SLIDER, Atspi.Role.MENU_ITEM,
}
SWITCH = getattr(Atspi.Role, "SWITCH", None)
if SWITCH is not None:
    ACTIONABLE.add(SWITCH)


# GTK 4.8 names an unnamed widget after its type ("GtkMenuButton"): that is no name.
TYPE_NAME = re.compile(r"^(Gtk|Adw|Dcp)[A-Z][A-Za-z]*$")


def walk(obj, depth=0):
    yield obj
    for i in range(obj.get_child_count()):
        child = obj.get_child_at_index(i)
        if child is not None:
            yield from walk(child, depth + 1)


def find_app(name, deadline):
    while time.time() < deadline:
        desktop = Atspi.get_desktop(0)
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is not None and app.get_name() == name:
                # The window's widgets are there once the model list is.
                texts = [o.get_name() for o in walk(app)]
                if any(t and ".mcapy" in t for t in texts):
                    return app
        time.sleep(0.3)
    return None


def in_toast(obj):
    """libadwaita 1.2's own toast close button has no name and no API to give it one."""
    while obj is not None:
        if obj.get_name() == "AdwToastWidget":
            return True
        obj = obj.get_parent()
    return False


def describe(obj):
    path = []
    while obj is not None and obj.get_role() != Atspi.Role.APPLICATION and len(path) < 6:
        path.append(f"{obj.get_role_name()}:{obj.get_name()!r}")
        obj = obj.get_parent()
    return " < ".join(path)


def run(build, language, attempt=0):
    tmp = tempfile.mkdtemp()
    env = dict(os.environ)
    for key in ("NO_AT_BRIDGE", "GSETTINGS_SCHEMA_DIR", "DECAPYBARA_PRESETS_DIR", "DECAPYBARA_ENGINE", "G_DEBUG"):
        env.pop(key, None)
    env.update(HOME=tmp, XDG_CONFIG_HOME=f"{tmp}/config", XDG_DATA_HOME=f"{tmp}/data",
               XDG_CACHE_HOME=f"{tmp}/cache", XDG_RUNTIME_DIR=tmp, GSETTINGS_BACKEND="memory",
               LANGUAGE=language, LANG="C.UTF-8", LC_ALL="C.UTF-8", GTK_A11Y="atspi")
    proc = subprocess.Popen([f"{build}/launcher/run"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        app = find_app("decapybara-launcher", time.time() + 60)
        if app is None:
            proc.kill()
            err = proc.stderr.read()
            if "cannot open display" in err and attempt == 0:
                # Xvfb not there yet for this client (seen under load): once more
                print(f"{language}: the display was not ready; again")
                time.sleep(2)
                return run(build, language, attempt + 1)
            sys.exit(f"{language}: the launcher did not show up on the accessibility bus:\n{err}")
        unnamed, names, controls = [], [], 0
        for obj in walk(app):
            name = obj.get_name() or ""
            names.append(name)
            if obj.get_role() in ACTIONABLE and not in_toast(obj):
                controls += 1
                if os.environ.get("A11Y_LIST"):
                    print(f"  {describe(obj)}")
                if not name.strip() or TYPE_NAME.match(name):
                    unnamed.append(describe(obj))
        return unnamed, names, controls
    finally:
        subprocess.run(["gdbus", "call", "--session", "--dest", "io.github.decapybara.Decapybara",
                        "--object-path", "/io/github/decapybara/Decapybara", "--method",
                        "org.gtk.Actions.Activate", "quit", "[]", "{}"], stdout=subprocess.DEVNULL)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    build = sys.argv[1]
    Atspi.init()
    status = 0
    for language, expected in (("en", ["Model sources", "Load server", "Models folder"]),
                               ("de", ["Modellquellen", "Server laden", "Modellordner"])):
        unnamed, names, controls = run(build, language)
        for what in unnamed:
            print(f"{language}: a control without a name: {what}")
        missing = [e for e in expected if e not in names]
        if missing:
            print(f"{language}: labels not found: {missing}")
        if unnamed or missing:
            status = 1
        else:
            print(f"ok {language}: {controls} controls among {len(names)} accessible objects, every one named")
    sys.exit(status)


if __name__ == "__main__":
    main()
