"""A saved ``--debug.save_config_file`` JSON read back as a config, with the position of every key."""

from __future__ import annotations

import re

from meshlint.errors import InputError


MAX_SAVED_BYTES = 8 << 20         # a saved config: 0.46 MB for deepseek_v3_671b (all 61 layers written out)
MAX_JSON_DEPTH = 64


# ----------------------------------------------------------------------------- saved configs

def read_saved_config(path: str, text: str | None = None):
    """The JSON ``--debug.save_config_file`` writes (trainer.py:238-246: ``json.dump(config.to_dict())``)
    as a PySource: sections as in Trainer.Config, ``model_spec`` {name, flavor, model} read as
    ``data["model"] = {"name", "flavor"}``, positions of every key in the JSON, nothing unknown."""
    import json

    from meshlint.inputs.pysource import PySource

    if text is None:
        from meshlint.inputs.source import read_bytes

        raw = read_bytes(path, MAX_SAVED_BYTES)
        if len(raw) > MAX_SAVED_BYTES:
            raise InputError("ML007", f"file is over {MAX_SAVED_BYTES:,} bytes: larger than any saved torchtitan config "
                                      f"(limit {MAX_SAVED_BYTES:,})")
        if b"\x00" in raw:
            raise InputError("ML002", "binary file (NUL byte at offset %d)" % raw.find(b"\x00"))
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError("ML002", f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    elif len(text) > MAX_SAVED_BYTES:
        raise InputError("ML007", f"the saved config is over {MAX_SAVED_BYTES:,} characters")
    positions = _json_positions(text)   # also bounds the nesting before json.loads recurses
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("ML006", f"not a saved torchtitan config: invalid JSON ({exc.msg})", exc.lineno,
                         exc.colno) from None
    except (RecursionError, ValueError) as exc:
        raise InputError("ML006", f"not a saved torchtitan config: invalid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("parallelism"), dict):
        raise InputError("ML006", "not a saved torchtitan config: a JSON object with a \"parallelism\" section, as "
                                  "--debug.save_config_file writes, was expected",
                         help="torchtitan writes it to <dump_folder>/<save_config_file> (trainer.py:238-246)")
    model_spec = data.pop("model_spec", None)
    model_config = None
    if isinstance(model_spec, dict):
        model = {k: model_spec[k] for k in ("name", "flavor") if isinstance(model_spec.get(k), str)}
        model_config = model_spec.get("model")
        if model:
            data["model"] = model
        for k in ("name", "flavor"):
            if f"model_spec.{k}" in positions:
                positions[f"model.{k}"] = positions[f"model_spec.{k}"]
        if "model_spec" in positions:
            positions["model"] = positions["model_spec"]
    positions = {k: v for k, v in positions.items() if not k.startswith("model_spec")}
    source = PySource(file=path, function="", text=text, data=data, unknown={}, positions=positions, comments=[],
                      def_line=1, def_col=1)
    source.path = path
    source.saved = True
    source.model_config = model_config   # the model's own config tree as saved (dims, layers)
    return source


_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+|\S')


def _json_positions(text: str) -> dict:
    """dotted key path (``a.b[0].c``) -> (line, col) of the key (or list item) in a JSON text.
    Linear, iterative; deeper nesting than MAX_JSON_DEPTH is refused (ML007)."""
    import bisect
    import json

    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    out: dict = {}
    stack: list = []          # frames: [kind, path, index or pending key]
    pending_key = None
    expect_key = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in "{[":
            if len(stack) >= MAX_JSON_DEPTH:
                line = bisect.bisect_right(starts, m.start())
                raise InputError("ML007", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", line, 1)
            path = _json_child(stack, pending_key)
            if path is not None and stack and stack[-1][0] == "[":
                _json_record(out, path, m.start(), starts)
            stack.append([tok, path, 0])
            pending_key = None
            expect_key = tok == "{"
        elif tok in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif tok == ",":
            if stack and stack[-1][0] == "[":
                stack[-1][2] += 1
            expect_key = bool(stack) and stack[-1][0] == "{"
        elif tok == ":":
            expect_key = False
        elif tok.startswith('"') and expect_key and stack and stack[-1][0] == "{":
            try:
                pending_key = json.loads(tok)
            except ValueError:
                pending_key = tok.strip('"')
            path = _json_child(stack, pending_key)
            if path is not None:
                _json_record(out, path, m.start(), starts)
            expect_key = False
        else:
            if stack and stack[-1][0] == "[":
                path = _json_child(stack, None)
                if path is not None:
                    _json_record(out, path, m.start(), starts)
            pending_key = None
    return out


def _json_child(stack: list, key) -> str | None:
    if not stack:
        return None
    kind, path, index = stack[-1]
    if path is None and len(stack) > 1:
        return None
    if kind == "{":
        if key is None:
            return None
        return f"{path}.{key}" if path else str(key)
    return f"{path}[{index}]" if path else None


def _json_record(out: dict, path: str, offset: int, starts: list) -> None:
    import bisect

    if path in out:
        return
    line = bisect.bisect_right(starts, offset)
    out[path] = (line, offset - starts[line - 1] + 1)
