# A typical 4.x VCL of the WordPress/Drupal guides (bench/vcl.sh): URL normalisation, cookie
# stripping, a few regexes in vcl_recv, headers in vcl_deliver. ORIGIN_PORT is replaced.
vcl 4.1;
import std;

backend default { .host = "127.0.0.1"; .port = "ORIGIN_PORT"; }

acl purge { "127.0.0.1"; }

sub vcl_recv {
    if (req.method == "PURGE") {
        if (!client.ip ~ purge) { return (synth(405, "Not allowed")); }
        return (purge);
    }
    set req.url = std.querysort(req.url);
    set req.url = regsub(req.url, "\?$", "");
    set req.url = regsuball(req.url, "(utm_[a-z]+|gclid|fbclid)=[^&]*&?", "");
    if (req.url ~ "^/(wp-admin|wp-login|admin|user)") { return (pass); }
    if (req.http.Cookie) {
        set req.http.Cookie = regsuball(req.http.Cookie, "(^|;\s*)(_ga|_gid|__utm[a-z]+|has_js)=[^;]*", "");
        set req.http.Cookie = regsub(req.http.Cookie, "^;\s*", "");
        if (req.http.Cookie ~ "^\s*$") { unset req.http.Cookie; }
    }
    if (req.url ~ "\.(css|js|png|gif|jpe?g|svg|ico|woff2?)(\?.*)?$") { unset req.http.Cookie; }
    if (req.http.Authorization || req.http.Cookie) { return (pass); }
    return (hash);
}

sub vcl_backend_response {
    if (bereq.url ~ "\.(css|js|png|gif|jpe?g|svg|ico|woff2?)(\?.*)?$") {
        unset beresp.http.Set-Cookie;
        set beresp.ttl = 1d;
    }
    set beresp.grace = 1h;
}

sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
    unset resp.http.X-Powered-By;
    set resp.http.X-Frame-Options = "SAMEORIGIN";
}
