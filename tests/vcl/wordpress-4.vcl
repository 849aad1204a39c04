# A 4.x configuration in the style of the public WordPress guides: cookie stripping, URL
# normalisation, purging from an ACL, probes and a round-robin director.
vcl 4.1;

import std;
import directors;

probe health {
    .request =
        "GET /healthcheck.php HTTP/1.1"
        "Host: www.example.com"
        "Connection: close";
    .timeout = 2s;
    .interval = 5s;
    .window = 5;
    .threshold = 3;
    .initial = 2;
    .expected_response = 200;
}

backend web1 { .host = "10.0.0.11"; .port = "8080"; .probe = health; .first_byte_timeout = 60s; }
backend web2 { .host = "10.0.0.12"; .port = "8080"; .probe = health; .max_connections = 300; }

acl purge {
    "localhost";
    "127.0.0.1";
    "10.0.0.0"/24;
    !"10.0.0.13";
}

sub vcl_init {
    new cluster = directors.round_robin();
    cluster.add_backend(web1);
    cluster.add_backend(web2);
}

sub vcl_recv {
    set req.backend_hint = cluster.backend();
    set req.url = std.querysort(req.url);
    set req.url = regsub(req.url, "\?$", "");
    if (req.method == "PURGE") {
        if (!client.ip ~ purge) {
            return (synth(405, "Not allowed."));
        }
        return (purge);
    }
    if (req.method == "BAN") {
        ban("obj.http.x-url ~ " + req.url + " && obj.http.x-host == " + req.http.host);
        return (synth(200, "Banned"));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
    if (req.url ~ "wp-admin|wp-login" || req.http.Cookie ~ "wordpress_logged_in_") {
        return (pass);
    }
    set req.http.Cookie = regsuball(req.http.Cookie, "(^|;\s*)(_[_a-z]+|has_js)=[^;]*", "");
    set req.http.Cookie = regsub(req.http.Cookie, "^;\s*", "");
    if (req.http.Cookie == "") {
        unset req.http.Cookie;
    }
    if (req.http.Accept-Encoding) {
        if (req.url ~ "\.(jpg|png|gif|gz|tgz|bz2|mp3|ogg)$") {
            unset req.http.Accept-Encoding;
        } elsif (req.http.Accept-Encoding ~ "gzip") {
            set req.http.Accept-Encoding = "gzip";
        } else {
            unset req.http.Accept-Encoding;
        }
    }
    return (hash);
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

sub vcl_backend_response {
    set beresp.http.x-url = bereq.url;
    set beresp.http.x-host = bereq.http.host;
    if (bereq.url ~ "\.(css|js|png|gif|jp(e)?g|swf|ico)$") {
        unset beresp.http.set-cookie;
        set beresp.ttl = 7d;
    }
    if (beresp.status >= 500 && bereq.is_bgfetch) {
        return (abandon);
    }
    set beresp.grace = 6h;
    if (beresp.ttl <= 0s || beresp.http.Set-Cookie || beresp.http.Vary == "*") {
        set beresp.ttl = 120s;
        set beresp.uncacheable = true;
        return (deliver);
    }
    return (deliver);
}

sub vcl_deliver {
    unset resp.http.x-url;
    unset resp.http.x-host;
    unset resp.http.X-Powered-By;
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}

sub vcl_synth {
    if (resp.status == 720) {
        set resp.http.Location = resp.reason;
        set resp.status = 301;
        return (deliver);
    }
    set resp.http.Content-Type = "text/html; charset=utf-8";
    synthetic({"<!DOCTYPE html>
<html><body><h1>"} + resp.status + " " + resp.reason + {"</h1></body></html>
"});
    return (deliver);
}
