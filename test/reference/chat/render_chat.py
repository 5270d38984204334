#!/usr/bin/python3
"""Expected chat renderings for the workbench's chat-template tests, from Jinja2 set up as transformers'
apply_chat_template sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, its
tojson, raise_exception and strftime_now; the tokenizer's special tokens in the context): an implementation
independent of the workbench's. For each conversation and real template it writes the full rendering and the
assistant spans by the rule the workbench documents (main/host/datasets/chat-spans.ts): a turn starts where the
rendering of the turns before it with add_generation_prompt ends, and ends after the end-of-turn marker the
template writes after an assistant's content.

Usage: render_chat.py CONVERSATIONS.jsonl OUT.json NAME=path/to/tokenizer_config.json ...
(Debian's python3-jinja2.)"""

import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

SHAREGPT = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}


def messages_of(record):
    if "messages" in record:
        return record["messages"]
    if "conversations" in record:
        return [{"role": SHAREGPT[t["from"]], "content": t["value"]} for t in record["conversations"]]
    user = record["instruction"] + ("\n\n" + record["input"] if record.get("input") else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": record["output"]}]


def compile_template(text):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(text)


def token_text(v):
    return v["content"] if isinstance(v, dict) else v


def main():
    conversations = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    out = {}
    for spec in sys.argv[3:]:
        name, path = spec.split("=", 1)
        config = json.load(open(path))
        template = compile_template(config["chat_template"])
        special = {k: token_text(config[k]) for k in ("bos_token", "eos_token", "unk_token", "pad_token") if config.get(k)}

        def render(messages, gen):
            return template.render(messages=messages, add_generation_prompt=gen, **special)

        probe = render([{"role": "user", "content": "probe-user-\u2063"}, {"role": "assistant", "content": "probe-assistant-\u2063"}], False)
        marker = probe[probe.rindex("probe-assistant-\u2063") + len("probe-assistant-\u2063"):].rstrip()
        rows = []
        for record in conversations:
            messages = messages_of(record)
            text = render(messages, False)
            spans = []
            for i, m in enumerate(messages):
                if m["role"] != "assistant":
                    continue
                header = render(messages[:i], True)
                assert text.startswith(header), (name, i)
                start = len(header)
                end = text.index(marker, start) + len(marker)
                spans.append([start, end])
            rows.append({"text": text, "spans": spans})
        out[name] = {"marker": marker, "records": rows}
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
