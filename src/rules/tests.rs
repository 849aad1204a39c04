//! The rules' unit tests: matchers, actions, both phases, the fast path's questions.

/// `client_cert` matches the subject of a verified client certificate, the empty string
/// without one; the fast path asks with the connection's subject too.
/// `scheme`: an HTTP-to-HTTPS redirect answers cleartext requests only; TLS hits stay
/// fast.
#[test]
fn scheme_matcher() {
    let r = rules(
        "[[rule]]\nscheme = \"http\"\nurl = '^(.*)$'\nredirect = { to = \"https://example.com$1\", status = 301 }\n",
    );
    let mut h = HeaderMap::new();
    let http = r.on_request("example.com", "/a?b", &Method::GET, &mut h, Conn::default());
    assert_eq!(
        http.redirect.map(|(s, to)| (s.as_u16(), to)),
        Some((301, "https://example.com/a?b".to_string()))
    );
    let https = Conn {
        https: true,
        client_cert: "",
        ..Conn::default()
    };
    assert!(
        r.on_request("example.com", "/a", &Method::GET, &mut h, https)
            .redirect
            .is_none()
    );
    assert!(!r.change_a_hit("example.com", "/a", &Method::GET, &h, false, https));
    assert!(r.change_a_hit(
        "example.com",
        "/a",
        &Method::GET,
        &h,
        false,
        Conn::default()
    ));
}

#[test]
fn client_cert_matcher() {
    let r = rules("[[rule]]\nclient_cert = '^$'\nsynth = { status = 403 }\n");
    let mut h = HeaderMap::new();
    let anonymous = r.on_request("x", "/", &Method::GET, &mut h, Conn::default());
    assert!(anonymous.synth.is_some());
    let alice = Conn {
        https: true,
        client_cert: "CN=alice,O=Example",
        ..Conn::default()
    };
    assert!(
        r.on_request("x", "/", &Method::GET, &mut h, alice)
            .synth
            .is_none()
    );
    assert!(r.change_a_hit("x", "/", &Method::GET, &h, false, Conn::default()));
    assert!(!r.change_a_hit("x", "/", &Method::GET, &h, false, alice));
}

use super::*;
use crate::config::Config;
use http::HeaderValue;

fn rules(text: &str) -> Rules {
    let full = format!("[[backend]]\nhost = \"127.0.0.1\"\n\n{text}");
    let config = Config::parse(&full, "t.toml").unwrap_or_else(|e| panic!("{e:?}"));
    Rules::compile(&config.rules)
}

/// Only a matching rule that answers or edits the request changes a hit; response-phase
/// rules, `cache` and directors do not, and neither do rules that do not match.
#[test]
fn which_rules_change_a_hit() {
    let r = rules(
        "[[rule]]\nttl = \"1h\"\n\n[[rule]]\npath = '^/api'\ncache = true\n\n\
         [[rule]]\ncookie = '^session'\npass = true\n\n\
         [[rule]]\nrequest_header = { \"x-debug\" = \"\" }\nset_request_headers = { \"x-a\" = \"1\" }\n",
    );
    assert!(r.act_on_requests(false, false));
    let mut h = HeaderMap::new();
    assert!(!r.change_a_hit(
        "example.com",
        "/api/x",
        &Method::GET,
        &h,
        true,
        Conn::default()
    ));
    h.insert(header::COOKIE, HeaderValue::from_static("a=1; session=2"));
    assert!(
        r.change_a_hit(
            "example.com",
            "/api/x",
            &Method::GET,
            &h,
            true,
            Conn::default()
        ),
        "pass"
    );
    h.clear();
    h.insert("x-debug", HeaderValue::from_static("1"));
    assert!(
        r.change_a_hit("example.com", "/", &Method::GET, &h, true, Conn::default()),
        "edits"
    );
    let quiet = rules("[[rule]]\nmin_ttl = \"2m\"\nstrip_set_cookie = true\n");
    assert!(!quiet.act_on_requests(true, true));
    assert!(!quiet.change_a_hit("example.com", "/", &Method::GET, &h, true, Conn::default()));
    // Stripping cookies changes a hit only where cookies matter.
    let strip = rules("[[rule]]\npath = '\\.css$'\nstrip_request_cookies = true\ncache = true\n");
    h.insert(header::COOKIE, HeaderValue::from_static("a=1"));
    assert!(!strip.change_a_hit(
        "example.com",
        "/s.css",
        &Method::GET,
        &h,
        false,
        Conn::default()
    ));
    assert!(strip.change_a_hit(
        "example.com",
        "/s.css",
        &Method::GET,
        &h,
        true,
        Conn::default()
    ));
}

/// An `flv` rule changes only seeks (`?start=`): plain requests do not even need the rules
/// matched; a rule saying `compress` is seen.
#[test]
fn an_flv_rule_changes_only_seeks() {
    let r = rules("[[rule]]\npath = '\\.flv$'\nflv = true\n\n[[rule]]\nttl = \"1h\"\n");
    assert!(!r.act_on_requests(false, false));
    assert!(r.act_on_requests(false, true));
    let h = HeaderMap::new();
    let hit = |target| {
        r.change_a_hit(
            "example.com",
            target,
            &Method::GET,
            &h,
            false,
            Conn::default(),
        )
    };
    assert!(!hit("/v.flv"));
    assert!(hit("/v.flv?start=100"));
    assert!(!hit("/info.php?start=100"), "not matched");
    assert!(!r.say_compress());
    assert!(rules("[[rule]]\npath = '^/a'\ncompress = false\n").say_compress());
}

/// `rate_limit` keys: `host` and `site` count per host / per site, and a set of site
/// rules counts apart from the global set (`scoped`); without a limiter nothing counts.
#[test]
fn rate_limit_keys_host_and_site() {
    struct Seen(std::sync::Mutex<Vec<String>>);
    impl Limiter for Seen {
        fn deny(&self, key: &str, _: Limit) -> Option<std::time::Duration> {
            let mut seen = self.0.lock().unwrap();
            let denied = seen.iter().any(|k| k == key);
            seen.push(key.to_string());
            denied.then_some(std::time::Duration::from_secs(5))
        }
    }
    let seen = Seen(std::sync::Mutex::new(Vec::new()));
    let text = "[[rule]]\nrate_limit = { key = \"host\", requests = 1, per = \"1m\" }\n\n\
                [[rule]]\nrate_limit = { key = \"site\", requests = 1, per = \"1m\" }\n";
    let global = rules(text);
    let site = rules(text).scoped("shop");
    let conn = |site| Conn {
        site,
        limiter: Some(&seen),
        ..Conn::default()
    };
    let mut h = HeaderMap::new();
    let get = |r: &Rules, host, site, h: &mut HeaderMap| {
        r.on_request(host, "/", &Method::GET, h, conn(site)).limited
    };
    assert_eq!(get(&global, "A.example:80", None, &mut h), None);
    // Same host (case and port aside): the `host` rule refuses.
    assert_eq!(
        get(&global, "a.example", None, &mut h),
        Some(std::time::Duration::from_secs(5))
    );
    assert_eq!(get(&global, "b.example", Some("blog"), &mut h), None);
    // Another host of site `blog`: the `site` rule refuses.
    assert!(get(&global, "c.example", Some("blog"), &mut h).is_some());
    // The site's own rules count apart.
    assert_eq!(get(&site, "b.example", Some("blog"), &mut h), None);
    // A rate-limited request is never a fast hit.
    assert!(global.change_a_hit("x", "/", &Method::GET, &h, false, Conn::default()));
    // Without a limiter (the fast-hit question) nothing is taken.
    let before = seen.0.lock().unwrap().len();
    global.on_request("a.example", "/", &Method::GET, &mut h, Conn::default());
    assert_eq!(seen.0.lock().unwrap().len(), before);
}

#[test]
fn static_files_get_an_hour() {
    let r = rules(
        "[[rule]]\npath = '\\.(png|gif|jpg|swf|css|js)$'\nttl = \"1h\"\noverride_origin = true\n",
    );
    let mut h = HeaderMap::new();
    let out = r.on_request(
        "example.com",
        "/a/b.css?v=1",
        &Method::GET,
        &mut h,
        Conn::default(),
    );
    assert_eq!(out.matched, vec![0]);
    let o = r.on_response(&out.matched, &Method::GET, StatusCode::OK, &mut h);
    assert_eq!(o.ttl, Some(std::time::Duration::from_secs(3600)));
    assert!(o.override_origin);
    assert!(
        r.on_request(
            "example.com",
            "/page.php",
            &Method::GET,
            &mut h,
            Conn::default()
        )
        .matched
        .is_empty()
    );
}

#[test]
fn hosts_methods_headers_cookies() {
    let r = rules(
        "[[rule]]\nhost = \"*.example.com\"\nmethod = [\"GET\"]\nrequest_header = { \"X-Debug\" = \"\" }\npass = true\n\n[[rule]]\ncookie = '^wordpress_logged_in_'\npass = true\nname = \"logged-in\"\n",
    );
    let mut h = HeaderMap::new();
    h.insert("x-debug", "1".parse().unwrap());
    assert_eq!(
        r.on_request(
            "WWW.Example.com:8080",
            "/",
            &Method::GET,
            &mut h,
            Conn::default()
        )
        .pass
        .as_deref(),
        Some("rule0")
    );
    assert!(
        r.on_request("example.org", "/", &Method::GET, &mut h, Conn::default())
            .pass
            .is_none()
    );
    let mut h = HeaderMap::new();
    h.insert("cookie", "a=1; wordpress_logged_in_abc=x".parse().unwrap());
    assert_eq!(
        r.on_request("x", "/", &Method::GET, &mut h, Conn::default())
            .pass
            .as_deref(),
        Some("logged-in")
    );
}

#[test]
fn redirect_with_captures_and_synth() {
    let r = rules(
        "[[rule]]\npath = '^/old/(.*)$'\nredirect = { to = \"https://new.example/$1\", status = 301 }\n\n[[rule]]\npath = '^/admin'\nsynth = { status = 403, body = \"no\" }\n",
    );
    let mut h = HeaderMap::new();
    let out = r.on_request("x", "/old/a/b", &Method::GET, &mut h, Conn::default());
    assert_eq!(
        out.redirect,
        Some((
            StatusCode::MOVED_PERMANENTLY,
            "https://new.example/a/b".into()
        ))
    );
    let out = r.on_request("x", "/admin/x", &Method::GET, &mut h, Conn::default());
    assert_eq!(out.synth.map(|s| s.0), Some(StatusCode::FORBIDDEN));
}

/// nginx's `return 301 https://$host$request_uri;` as a rule: its variables are expanded
/// (the host lower case without port, the target as sent, `$uri` decoded and escaped again),
/// a capture group of the same name wins, `$$` is a `$`, and nothing is expanded twice.
#[test]
fn redirect_with_nginx_variables() {
    let r = rules(concat!(
        "[[rule]]\nscheme = \"http\"\npath = '^/'\n",
        "redirect = { to = \"https://$host$request_uri\", status = 301 }\n\n",
        "[[rule]]\npath = '^/(?P<host>x)/(.*)$'\n",
        "redirect = { to = \"$scheme://$host/${2}?$args&u=$uri&$$1\", status = 302 }\n",
    ));
    let mut h = HeaderMap::new();
    let out = r.on_request(
        "WWW.Example.org:80",
        "/a/b%20c?x=1&y=$host",
        &Method::GET,
        &mut h,
        Conn::default(),
    );
    assert_eq!(
        out.redirect,
        Some((
            StatusCode::MOVED_PERMANENTLY,
            "https://www.example.org/a/b%20c?x=1&y=$host".into()
        ))
    );
    let tls = Conn {
        https: true,
        ..Conn::default()
    };
    let out = r.on_request("h.test", "/x/caf%C3%A9?q", &Method::GET, &mut h, tls);
    assert_eq!(
        out.redirect,
        Some((
            StatusCode::FOUND,
            "https://x/caf%C3%A9?q&u=/x/caf%C3%A9&$1".into()
        ))
    );
}

/// A `$name` in a redirect's `to` that is no capture group and no variable is refused, as
/// is a `$n` beyond the groups: it would expand to nothing.
#[test]
fn unknown_redirect_names_are_config_errors() {
    let full = concat!(
        "[[backend]]\nhost = \"h\"\n\n",
        "[[rule]]\npath = '^/(a)$'\nredirect = { to = \"/$1/$2/$hots/$host\" }\n",
    );
    let errs = Config::parse(full, "t.toml").unwrap_err();
    let all: Vec<String> = errs.iter().map(|e| e.message.clone()).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all[0].contains("`$2`") && all[0].contains("(it has 1)"),
        "{all:?}"
    );
    assert!(
        all[1].contains("`$hots`") && all[1].contains("$request_uri"),
        "{all:?}"
    );
}

#[test]
fn strip_set_cookie_except_post_and_response_matchers() {
    let r = rules("[[rule]]\nstrip_set_cookie = true\n\n[[rule]]\nstatus = [404]\nttl = \"10s\"\n");
    let mut req = HeaderMap::new();
    let out = r.on_request("x", "/", &Method::GET, &mut req, Conn::default());
    let mut h = HeaderMap::new();
    h.insert("set-cookie", "a=b".parse().unwrap());
    let o = r.on_response(&out.matched, &Method::GET, StatusCode::OK, &mut h);
    assert!(!h.contains_key("set-cookie"));
    assert_eq!(o.ttl, None, "status rule does not match a 200");
    let mut h = HeaderMap::new();
    h.insert("set-cookie", "a=b".parse().unwrap());
    r.on_response(&out.matched, &Method::POST, StatusCode::OK, &mut h);
    assert!(h.contains_key("set-cookie"), "kept on POST");
    let o = r.on_response(
        &out.matched,
        &Method::GET,
        StatusCode::NOT_FOUND,
        &mut HeaderMap::new(),
    );
    assert_eq!(o.ttl, Some(std::time::Duration::from_secs(10)));
}

#[test]
fn invalid_rules_are_config_errors() {
    let full = "[[backend]]\nhost = \"h\"\n\n[[rule]]\npath = '(unclosed'\n\n[[rule]]\nstatus = [200]\npass = true\n";
    let errs = Config::parse(full, "t.toml").unwrap_err();
    let all: Vec<String> = errs
        .iter()
        .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
        .collect();
    assert!(
        all.iter()
            .any(|e| e.starts_with("5:rule.0.path: invalid regex")),
        "{all:?}"
    );
    assert!(all.iter().any(|e| e.contains("rule.1.status")), "{all:?}");
}
