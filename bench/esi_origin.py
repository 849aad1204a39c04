#!/usr/bin/env python3
"""The origin of bench/esi.sh (threaded, HTTP/1.1 keep-alive): ADDR:PORT as the argument.
  /page       a 2.4 KB ESI page with 10 `<esi:include src="/frag/N"/>`, max-age=3600
  /frag/N     a 1 KB fragment, max-age=3600
  /slowpage   the same page including /slow/1 ... /slow/10, max-age=3600
  /slow/N     a 1 KB fragment answered after 50 ms, Cache-Control: no-store (never cached)
"""
import http.server, socketserver, sys, time


def frag(n):
    items = "".join(f'<li class="entry"><a href="/item/{n}/{i}">Item {i} of box {n}</a></li>' for i in range(12))
    return f'<section class="box" id="box{n}"><h2>Box {n}</h2><ul>{items}</ul></section>\n'.encode()


def page(prefix):
    head = '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>ESI page</title></head><body>\n'
    parts = [head, '<header><nav><a href="/">Home</a> <a href="/news">News</a></nav></header>\n<main>\n']
    for n in range(1, 11):
        parts.append(f'<div class="slot">Slot {n}: <esi:include src="/{prefix}/{n}"/></div>\n')
        parts.append('<p>' + 'Some text between the boxes of this page. ' * 3 + '</p>\n')
    parts.append('</main><footer>footer</footer></body></html>\n')
    return "".join(parts).encode()


BODIES = {"/page": page("frag"), "/slowpage": page("slow")}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and body in one write, Nagle off: no delayed-ACK wait between them.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def do_GET(self):
        path = self.path.split("?")[0]
        cc = "public, max-age=3600"
        if path in BODIES:
            body = BODIES[path]
        elif path.startswith("/frag/"):
            body = frag(path[6:])
        elif path.startswith("/slow/"):
            time.sleep(0.05)
            body, cc = frag(path[6:]), "no-store"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cc)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256


host, port = sys.argv[1].rsplit(":", 1)
Server((host, int(port)), Handler).serve_forever()
