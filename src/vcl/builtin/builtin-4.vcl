# The built-in VCL of VCL 4.0 and 4.1 files: what runs after the operator's own subroutines
# when they do not return. Varnish's bin/varnishd/builtin.vcl (BSD-2-Clause, Varnish
# Software AS), with Shellac's name in the error page's footer ("Shellac cache server", as
# long as Varnish's words, so the page's length is Varnish's for every status and id). As in Varnish 7, vcl_recv and
# vcl_backend_response call split subroutines (vcl_req_*, vcl_beresp_*) that a VCL may
# define too: its body runs first, and a bare `return;` skips the built-in one.
vcl 4.0;

sub vcl_recv {
    call vcl_req_host;
    call vcl_req_method;
    call vcl_req_authorization;
    call vcl_req_cookie;
    return (hash);
}

sub vcl_req_host {
    if (!req.http.host &&
      req.esi_level == 0 &&
      req.proto ~ "^(?i)HTTP/1.1") {
        return (synth(400));
    }
}

sub vcl_req_method {
    if (req.method == "PRI") {
        return (synth(405));
    }
    if (req.method != "GET" &&
      req.method != "HEAD" &&
      req.method != "PUT" &&
      req.method != "POST" &&
      req.method != "TRACE" &&
      req.method != "OPTIONS" &&
      req.method != "DELETE" &&
      req.method != "PATCH") {
        return (pipe);
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
}

sub vcl_req_authorization {
    if (req.http.Authorization) {
        return (pass);
    }
}

sub vcl_req_cookie {
    if (req.http.Cookie) {
        return (pass);
    }
}

sub vcl_pipe {
    return (pipe);
}

sub vcl_pass {
    return (fetch);
}

sub vcl_hash {
    hash_data(req.url);
    if (req.http.host) {
        hash_data(req.http.host);
    } else {
        hash_data(server.ip);
    }
    return (lookup);
}

sub vcl_purge {
    return (synth(200, "Purged"));
}

sub vcl_hit {
    return (deliver);
}

sub vcl_miss {
    return (fetch);
}

sub vcl_deliver {
    return (deliver);
}

sub vcl_synth {
    set resp.http.Content-Type = "text/html; charset=utf-8";
    set resp.http.Retry-After = "5";
    set resp.body = {"<!DOCTYPE html>
<html>
  <head>
    <title>"} + resp.status + " " + resp.reason + {"</title>
  </head>
  <body>
    <h1>Error "} + resp.status + " " + resp.reason + {"</h1>
    <p>"} + resp.reason + {"</p>
    <h3>Guru Meditation:</h3>
    <p>XID: "} + req.xid + {"</p>
    <hr>
    <p>Shellac cache server</p>
  </body>
</html>
"};
    return (deliver);
}

sub vcl_backend_fetch {
    if (bereq.method == "GET") {
        unset bereq.body;
    }
    return (fetch);
}

sub vcl_backend_response {
    if (bereq.uncacheable) {
        return (deliver);
    }
    call vcl_beresp_stale;
    call vcl_beresp_cookie;
    call vcl_beresp_control;
    call vcl_beresp_vary;
    return (deliver);
}

sub vcl_beresp_stale {
    if (beresp.ttl <= 0s) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_cookie {
    if (beresp.http.Set-Cookie) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_control {
    if (beresp.http.Surrogate-control ~ "(?i)no-store" ||
      (!beresp.http.Surrogate-Control &&
        beresp.http.Cache-Control ~ "(?i:no-cache|no-store|private)")) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_vary {
    if (beresp.http.Vary == "*") {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_hitmiss {
    set beresp.ttl = param.uncacheable_ttl;
    set beresp.uncacheable = true;
    return (deliver);
}

sub vcl_backend_error {
    set beresp.http.Content-Type = "text/html; charset=utf-8";
    set beresp.http.Retry-After = "5";
    set beresp.body = {"<!DOCTYPE html>
<html>
  <head>
    <title>"} + beresp.status + " " + beresp.reason + {"</title>
  </head>
  <body>
    <h1>Error "} + beresp.status + " " + beresp.reason + {"</h1>
    <p>"} + beresp.reason + {"</p>
    <h3>Guru Meditation:</h3>
    <p>XID: "} + bereq.xid + {"</p>
    <hr>
    <p>Shellac cache server</p>
  </body>
</html>
"};
    return (deliver);
}

sub vcl_init {
    return (ok);
}

sub vcl_fini {
    return (ok);
}
