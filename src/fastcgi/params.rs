//! The CGI/1.1 parameters a FastCGI responder expects (RFC 3875 §4.1, plus what PHP reads:
//! SCRIPT_FILENAME, DOCUMENT_ROOT, REQUEST_URI, HTTPS, REDIRECT_STATUS), built from one
//! request, and the split of a path into the script and its PATH_INFO at the first `.php`
//! segment. Whether the script exists is the origin's question (it must never hand the
//! application a script that does not: `/uploads/evil.jpg/x.php`); this module only names it.

use std::net::SocketAddr;

use http::HeaderMap;

use super::record::put_pair;

/// A request path cut into the script and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptPath<'a> {
    /// Up to and including the first segment ending in the script extension (SCRIPT_NAME).
    pub script: &'a str,
    /// The rest, empty or starting with `/` (PATH_INFO).
    pub path_info: &'a str,
}

/// Splits a decoded request path at the first segment that ends with `extension` (".php"),
/// compared without letter case as Caddy does. `None`: no segment names a script (a
/// directory or a file of another type: the origin decides, e.g. index.php).
pub fn split_script<'a>(path: &'a str, extension: &str) -> Option<ScriptPath<'a>> {
    let mut start = 0;
    loop {
        let end = path[start..].find('/').map_or(path.len(), |n| start + n);
        let segment = &path[start..end];
        if segment.len() > extension.len()
            && segment
                .get(segment.len() - extension.len()..)
                .is_some_and(|tail| tail.eq_ignore_ascii_case(extension))
        {
            return Some(ScriptPath {
                script: &path[..end],
                path_info: &path[end..],
            });
        }
        if end == path.len() {
            return None;
        }
        start = end + 1;
    }
}

/// What the parameters are built from.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// GET, POST, ...
    pub method: &'a str,
    /// The request target as the client sent it (REQUEST_URI).
    pub target: &'a str,
    /// The query after `?`, without it (QUERY_STRING; empty when none).
    pub query: &'a str,
    /// The script, split from the decoded path.
    pub script: ScriptPath<'a>,
    /// The site's document root, without a trailing `/`.
    pub document_root: &'a str,
    /// The Host's name, without port (SERVER_NAME).
    pub server_name: &'a str,
    /// The address the connection was accepted on (SERVER_ADDR, SERVER_PORT).
    pub server_addr: SocketAddr,
    /// The client, after trusted proxies and PROXY protocol (REMOTE_ADDR, REMOTE_PORT).
    pub remote_addr: SocketAddr,
    /// The connection is TLS (HTTPS=on, REQUEST_SCHEME=https).
    pub https: bool,
    /// "HTTP/1.1", "HTTP/2.0" (SERVER_PROTOCOL).
    pub protocol: &'a str,
    /// The request's fields, after Shellac's hygiene (hop-by-hop and underscore names gone).
    pub fields: &'a HeaderMap,
    /// The body's length when known (CONTENT_LENGTH).
    pub content_length: Option<u64>,
    /// The operator's own `fastcgi_param`s, set last (they override).
    pub extra: &'a [(String, String)],
}

/// The encoded PARAMS stream (without record framing) for `req`.
pub fn encode(req: &Request<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    let mut pair = |name: &str, value: &str| {
        put_pair(&mut out, name.as_bytes(), value.as_bytes());
    };
    let script_filename = format!("{}{}", req.document_root, req.script.script);
    pair("GATEWAY_INTERFACE", "CGI/1.1");
    pair("SERVER_SOFTWARE", "shellac");
    pair("REQUEST_METHOD", req.method);
    pair("REQUEST_URI", req.target);
    pair("QUERY_STRING", req.query);
    pair("SCRIPT_NAME", req.script.script);
    pair("SCRIPT_FILENAME", &script_filename);
    pair("DOCUMENT_ROOT", req.document_root);
    pair("DOCUMENT_URI", req.script.script);
    pair("PATH_INFO", req.script.path_info);
    if !req.script.path_info.is_empty() {
        pair(
            "PATH_TRANSLATED",
            &format!("{}{}", req.document_root, req.script.path_info),
        );
    }
    pair("SERVER_NAME", req.server_name);
    pair("SERVER_ADDR", &req.server_addr.ip().to_string());
    pair("SERVER_PORT", &req.server_addr.port().to_string());
    pair("SERVER_PROTOCOL", req.protocol);
    pair("REMOTE_ADDR", &req.remote_addr.ip().to_string());
    pair("REMOTE_PORT", &req.remote_addr.port().to_string());
    pair("REQUEST_SCHEME", if req.https { "https" } else { "http" });
    if req.https {
        pair("HTTPS", "on");
    }
    // PHP built with cgi.force_redirect (Debian's default) refuses to run without it.
    pair("REDIRECT_STATUS", "200");
    if let Some(ct) = req
        .fields
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        pair("CONTENT_TYPE", ct);
    }
    match req.content_length {
        Some(n) => pair("CONTENT_LENGTH", &n.to_string()),
        None => pair("CONTENT_LENGTH", ""),
    }
    let mut name_buf = String::with_capacity(64);
    for name in req.fields.keys() {
        // CONTENT_* are above; Proxy is never passed (httpoxy, CVE-2016-5385).
        if name == http::header::CONTENT_TYPE
            || name == http::header::CONTENT_LENGTH
            || name.as_str() == "proxy"
        {
            continue;
        }
        // Joined as one value, as RFC 3875 §4.1.18 says; cookies with "; " (RFC 6265 §5.4).
        let sep = if name == http::header::COOKIE {
            "; "
        } else {
            ", "
        };
        let mut value = Vec::new();
        for (i, v) in req.fields.get_all(name).iter().enumerate() {
            if i > 0 {
                value.extend_from_slice(sep.as_bytes());
            }
            value.extend_from_slice(v.as_bytes());
        }
        name_buf.clear();
        name_buf.push_str("HTTP_");
        name_buf.extend(name.as_str().chars().map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        }));
        put_pair(&mut out, name_buf.as_bytes(), &value);
    }
    for (name, value) in req.extra {
        put_pair(&mut out, name.as_bytes(), value.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_ends_at_the_first_php_segment() {
        let s = split_script("/blog/index.php/2024/post", ".php").unwrap();
        assert_eq!((s.script, s.path_info), ("/blog/index.php", "/2024/post"));
        let s = split_script("/uploads/evil.jpg/x.php", ".php").unwrap();
        assert_eq!((s.script, s.path_info), ("/uploads/evil.jpg/x.php", ""));
        let s = split_script("/A.PHP", ".php").unwrap();
        assert_eq!(s.script, "/A.PHP");
        assert_eq!(split_script("/dir/", ".php"), None);
        assert_eq!(
            split_script("/.php", ".php"),
            None,
            "a segment that is only the extension"
        );
        assert_eq!(split_script("/x.php5", ".php"), None);
    }

    /// Decodes the pairs back, to check what the application will see.
    fn decode(mut b: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let len = |b: &mut &[u8]| -> usize {
            if b[0] < 128 {
                let n = b[0] as usize;
                *b = &b[1..];
                n
            } else {
                let n = (u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff) as usize;
                *b = &b[4..];
                n
            }
        };
        while !b.is_empty() {
            let (n, v) = (len(&mut b), len(&mut b));
            out.push((
                String::from_utf8_lossy(&b[..n]).into_owned(),
                String::from_utf8_lossy(&b[n..n + v]).into_owned(),
            ));
            b = &b[n + v..];
        }
        out
    }

    #[test]
    fn the_parameters_php_reads() {
        let mut fields = HeaderMap::new();
        fields.insert("host", "example.org".parse().unwrap());
        fields.append("cookie", "a=1".parse().unwrap());
        fields.append("cookie", "b=2".parse().unwrap());
        fields.insert("proxy", "http://evil:8080".parse().unwrap());
        fields.insert(
            "content-type",
            "application/x-www-form-urlencoded".parse().unwrap(),
        );
        fields.insert("x-requested-with", "XMLHttpRequest".parse().unwrap());
        let extra = [("APP_ENV".to_owned(), "prod".to_owned())];
        let req = Request {
            method: "POST",
            target: "/index.php/a/b?x=1",
            query: "x=1",
            script: split_script("/index.php/a/b", ".php").unwrap(),
            document_root: "/srv/www",
            server_name: "example.org",
            server_addr: "127.0.0.1:8080".parse().unwrap(),
            remote_addr: "[2001:db8::1]:40000".parse().unwrap(),
            https: true,
            protocol: "HTTP/1.1",
            fields: &fields,
            content_length: Some(7),
            extra: &extra,
        };
        let params = decode(&encode(&req));
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SCRIPT_FILENAME"), Some("/srv/www/index.php"));
        assert_eq!(get("SCRIPT_NAME"), Some("/index.php"));
        assert_eq!(get("PATH_INFO"), Some("/a/b"));
        assert_eq!(get("PATH_TRANSLATED"), Some("/srv/www/a/b"));
        assert_eq!(get("QUERY_STRING"), Some("x=1"));
        assert_eq!(get("REQUEST_URI"), Some("/index.php/a/b?x=1"));
        assert_eq!(get("REMOTE_ADDR"), Some("2001:db8::1"));
        assert_eq!(get("REMOTE_PORT"), Some("40000"));
        assert_eq!(get("SERVER_PORT"), Some("8080"));
        assert_eq!(get("HTTPS"), Some("on"));
        assert_eq!(get("CONTENT_LENGTH"), Some("7"));
        assert_eq!(
            get("CONTENT_TYPE"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(get("HTTP_COOKIE"), Some("a=1; b=2"));
        assert_eq!(get("HTTP_X_REQUESTED_WITH"), Some("XMLHttpRequest"));
        assert_eq!(get("HTTP_HOST"), Some("example.org"));
        assert_eq!(get("HTTP_PROXY"), None, "httpoxy");
        assert_eq!(get("HTTP_CONTENT_TYPE"), None);
        assert_eq!(get("APP_ENV"), Some("prod"));
        assert_eq!(get("REDIRECT_STATUS"), Some("200"));
    }
}
