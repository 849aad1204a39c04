#!/usr/bin/env python3
"""Writes a realistic 72 KiB HTML page (a documentation site's page: head, navigation, the
text of docs/*.md as paragraphs, lists, code and tables, a footer) to the path given, from the
repository's own docs, so every run and every server gets the same bytes. About 6:1 with gzip -6,
as real HTML."""
import html, pathlib, sys

SIZE = 72 * 1024
root = pathlib.Path(__file__).resolve().parent.parent
out = ['<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
       '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
       '<title>Shellac documentation</title>\n<link rel="stylesheet" href="/static/site.css">\n'
       '<script defer src="/static/site.js"></script>\n</head>\n<body class="docs">\n'
       '<header class="site-header"><nav class="top"><ul>']
docs = sorted((root / "docs").glob("*.md"))
for d in docs:
    out.append(f'<li class="nav-item"><a class="nav-link" href="/docs/{d.stem}.html">{d.stem}</a></li>')
out.append('</ul></nav></header>\n<main id="content" class="container">\n')
for d in docs:
    in_code = False
    for line in d.read_text().splitlines():
        if line.startswith("```"):
            out.append("</code></pre>\n" if in_code else '<pre class="highlight"><code>')
            in_code = not in_code
        elif in_code:
            out.append(html.escape(line) + "\n")
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            text = html.escape(line.lstrip("# "))
            out.append(f'<h{level} id="{text.lower().replace(" ", "-")[:40]}">{text}</h{level}>\n')
        elif line.startswith("|"):
            cells = "".join(f"<td>{html.escape(c.strip())}</td>" for c in line.strip("|").split("|"))
            out.append(f'<tr class="row">{cells}</tr>\n')
        elif line.startswith("- "):
            out.append(f'<li class="item">{html.escape(line[2:])}</li>\n')
        elif line.strip():
            out.append(f'<p class="text">{html.escape(line)}</p>\n')
    if sum(map(len, out)) > SIZE:
        break
tail = '</main>\n<footer class="site-footer"><p>Shellac</p></footer>\n</body>\n</html>\n'
body = "".join(out).encode()[: SIZE - len(tail)]
body = body[: body.rfind(b"\n") + 1] + tail.encode()
body += b" " * (SIZE - len(body))  # pad with trailing spaces to exactly 72 KiB
pathlib.Path(sys.argv[1]).write_bytes(body)
