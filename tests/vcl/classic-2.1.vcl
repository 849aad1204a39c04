# A 2.1 configuration as operators wrote them in 2009: inline probes, a random director,
# restarts on a failed backend, obj.* TTL overrides, bare actions and error pages.
backend app1 {
    .host = "192.168.0.10";
    .port = "80";
    .connect_timeout = 1s;
    .first_byte_timeout = 5s;
    .between_bytes_timeout = 2s;
    .probe = {
        .url = "/status";
        .interval = 5s;
        .timeout = 1 s;
        .window = 5;
        .threshold = 3;
    }
}

backend app2 {
    .host = "192.168.0.11";
    .port = "80";
    .probe = { .url = "/status"; .interval = 5s; .timeout = 1s; .window = 5; .threshold = 3; }
}

director pool random {
    .retries = 5;
    { .backend = app1; .weight = 2; }
    { .backend = app2; .weight = 1; }
}

director fallback_pool round-robin {
    { .backend = app1; }
    { .backend = { .host = "192.168.0.99"; .port = "80"; } }
}

acl local {
    "localhost";
    "192.168.0.0"/24;
}

sub vcl_recv {
    set req.backend = pool;
    if (req.restarts > 0) {
        set req.backend = fallback_pool;
    }
    if (req.request == "PURGE") {
        if (!client.ip ~ local) {
            error 405 "Not allowed.";
        }
        purge_url(req.url);
        error 200 "Purged";
    }
    if (req.request != "GET" && req.request != "HEAD") {
        pipe;
    }
    if (req.http.Authorization || req.http.Cookie ~ "session=") {
        pass;
    }
    remove req.http.Cookie;
    set req.grace = 30s;
    lookup;
}

sub vcl_hash {
    set req.hash += req.url;
    if (req.http.host) {
        set req.hash += req.http.host;
    } else {
        set req.hash += server.ip;
    }
    hash;
}

sub vcl_fetch {
    if (beresp.status == 500 || beresp.status == 503) {
        restart;
    }
    if (req.url ~ "^/static/") {
        unset beresp.http.Set-Cookie;
        set beresp.ttl = 1w;
    }
    if (!beresp.cacheable) {
        pass;
    }
    if (beresp.http.Set-Cookie) {
        pass;
    }
    set beresp.grace = 2m;
    esi;
    deliver;
}

sub vcl_deliver {
    set resp.http.X-Served-By = "varnish " server.hostname;
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    deliver;
}

sub vcl_error {
    set obj.http.Content-Type = "text/html; charset=utf-8";
    synthetic {"<?xml version="1.0" encoding="utf-8"?>
<html><head><title>"} obj.status " " obj.response {"</title></head>
<body><h1>Error "} obj.status " " obj.response {"</h1>
<p>XID: "} req.xid {"</p></body></html>
"};
    deliver;
}
