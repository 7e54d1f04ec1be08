"""The dashboard's copy of protocols/vocabulary.py: the text of dashboards/vocabulary.js,
which `python -m llmtap.protocols.vocabulary_js > dashboards/vocabulary.js` writes and
tests/protocols/test_vocabulary.py holds the committed file to.

Not responsible for the words (protocols/vocabulary.py), nor for putting the file in the
page (dashboards/page.py's SCRIPTS).
"""

from __future__ import annotations

import json

from llmtap.protocols.vocabulary import ALL, NO_FINISH

_JS_HEAD = """\
// llmtap dashboard: the fixed vocabularies (tool statuses, conversation problems, cache
// verdicts and causes, finish reasons, price statuses and reasons, report kinds).
// GENERATED from protocols/vocabulary.py, do not edit: run
//   python -m llmtap.protocols.vocabulary_js > dashboards/vocabulary.js
// (tests/protocols/test_vocabulary.py checks this file is what that writes).
// Not responsible for labels, colours or order of display (format.js, dashboard.js).
"""


def javascript() -> str:
    """The text of dashboards/vocabulary.js: one frozen global, `LlmtapVocabulary`, of
    frozen arrays, plus `NO_FINISH`, in the dashboard's own ES5 style."""
    lines = [_JS_HEAD.rstrip("\n"), "var LlmtapVocabulary = Object.freeze({"]
    for name, values in ALL.items():
        lines.append(f"  {name}: Object.freeze({json.dumps(list(values))}),")
    lines.append(f"  NO_FINISH: {json.dumps(NO_FINISH)},")
    lines.append("});")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(javascript())
