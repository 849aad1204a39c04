//! Cache deception armor: a rule may force caching of what a URL's extension promises, not of
//! whatever the origin answers for it.
//!
//! Web cache deception: a rule caches `\.(css|js|png)$` for an hour whatever the origin says;
//! an attacker sends a victim to `/account.php/x.css` (or `/account;x.css`,
//! `/account.php%2Fx.css`, `/account.php?x.css` for a `url` rule); the origin ignores the
//! suffix and answers with the victim's private account page, which the rule stores as a
//! "stylesheet" and serves to the attacker. Like Cloudflare's Cache Deception Armor, Shellac
//! applies a rule's caching actions (`ttl`, `min_ttl`, `override_origin`) only when the
//! response's `Content-Type` fits the extension the URL claims: a `.css` URL must answer
//! `text/css`, a `.png` one `image/png`. `application/octet-stream` fits any extension (it is
//! what a file server says when it does not know). An extension this table does not know fits
//! anything but an HTML page — the one thing a deceived path returns. A script's extension
//! (`.php`, `.asp`, `.jsp`, `.cgi`, ...) names a program, not a media type: what it answers
//! fits it, so a rule can cache `/index.php?p=1` or a `phpinfo()` page.

/// Media types each known extension may be served as (after `;` parameters, lower-cased).
const FITS: &[(&[&str], &[&str])] = &[
    (&["css"], &["text/css"]),
    (
        &["js", "mjs"],
        &[
            "text/javascript",
            "application/javascript",
            "application/x-javascript",
            "application/ecmascript",
            "text/ecmascript",
        ],
    ),
    (&["json", "map"], &["application/json", "+json"]),
    (&["xml"], &["application/xml", "text/xml", "+xml"]),
    (&["txt"], &["text/plain"]),
    (&["csv"], &["text/csv", "text/plain"]),
    (&["html", "htm"], &["text/html"]),
    (&["png"], &["image/png"]),
    (
        &["jpg", "jpeg", "jpe"],
        &["image/jpeg", "image/jpg", "image/pjpeg"],
    ),
    (&["gif"], &["image/gif"]),
    (&["webp"], &["image/webp"]),
    (&["avif"], &["image/avif"]),
    (&["svg", "svgz"], &["image/svg+xml"]),
    (
        &["ico"],
        &["image/x-icon", "image/vnd.microsoft.icon", "image/ico"],
    ),
    (&["bmp"], &["image/bmp", "image/x-ms-bmp"]),
    (&["tif", "tiff"], &["image/tiff"]),
    (
        &["woff"],
        &[
            "font/woff",
            "application/font-woff",
            "application/x-font-woff",
        ],
    ),
    (&["woff2"], &["font/woff2", "application/font-woff2"]),
    (
        &["ttf"],
        &[
            "font/ttf",
            "application/x-font-ttf",
            "application/font-sfnt",
            "font/sfnt",
        ],
    ),
    (
        &["otf"],
        &["font/otf", "application/x-font-otf", "font/sfnt"],
    ),
    (&["eot"], &["application/vnd.ms-fontobject"]),
    (&["swf"], &["application/x-shockwave-flash"]),
    (&["flv"], &["video/x-flv"]),
    (&["mp4", "m4v"], &["video/mp4"]),
    (&["webm"], &["video/webm", "audio/webm"]),
    (&["mp3"], &["audio/mpeg", "audio/mp3"]),
    (
        &["ogg", "oga", "ogv"],
        &["audio/ogg", "video/ogg", "application/ogg"],
    ),
    (&["wav"], &["audio/wav", "audio/x-wav", "audio/wave"]),
    (&["pdf"], &["application/pdf"]),
    (
        &["zip"],
        &["application/zip", "application/x-zip-compressed"],
    ),
    (&["gz", "tgz"], &["application/gzip", "application/x-gzip"]),
    (&["wasm"], &["application/wasm"]),
];

/// Whether a response with `content_type` fits every extension the request target
/// (`path_and_query`) claims: the last path segment's, and the query's if it ends in one (a
/// `url` rule sees it). Without a claimed extension, anything fits.
pub fn fits(path_and_query: &str, content_type: Option<&str>) -> bool {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    let mut claims = [Some(path), query]
        .into_iter()
        .flatten()
        .filter_map(extension);
    let media = content_type.map(|ct| {
        ct.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    claims.all(|ext| fits_one(&ext, media.as_deref()))
}

/// The extension a path (or query) ends with: after the last `.` of its last segment, where
/// segments end at `/`, an encoded `%2F` and `;` parameters count as part of the name (an
/// origin may route on what comes before them). Lower-cased; `None` if there is none.
fn extension(text: &str) -> Option<String> {
    let last = text.rsplit('/').next().unwrap_or(text);
    let (_, ext) = last.rsplit_once('.')?;
    if ext.is_empty() || ext.len() > 8 || !ext.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    Some(ext.to_ascii_lowercase())
}

/// Extensions of scripts (pages any type may come from).
const SCRIPTS: &[&str] = &[
    "php", "php3", "php4", "php5", "php7", "php8", "phtml", "asp", "aspx", "jsp", "jspx", "cgi",
    "pl", "py", "cfm", "do", "action",
];

fn fits_one(ext: &str, media: Option<&str>) -> bool {
    if SCRIPTS.contains(&ext) {
        return true;
    }
    let Some(media) = media.filter(|m| !m.is_empty()) else {
        // A file server names what it sends; a response without a type proves nothing.
        return false;
    };
    if media == "application/octet-stream" {
        return true;
    }
    match FITS.iter().find(|(exts, _)| exts.contains(&ext)) {
        Some((_, types)) => types.iter().any(|t| match t.strip_prefix('+') {
            Some(suffix) => media.ends_with(&format!("+{suffix}")),
            None => media == *t,
        }),
        None => media != "text/html" && media != "application/xhtml+xml",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_claimed_by_a_target() {
        assert_eq!(extension("/a/b.css").as_deref(), Some("css"));
        assert_eq!(extension("/account.php/x.CSS").as_deref(), Some("css"));
        assert_eq!(extension("/account;x.css").as_deref(), Some("css"));
        assert_eq!(extension("/account.php%2Fx.css").as_deref(), Some("css"));
        assert_eq!(extension("/a.b/c"), None);
        assert_eq!(extension("/a."), None);
        assert_eq!(extension("/"), None);
        assert_eq!(extension("x=1.css").as_deref(), Some("css"));
    }

    #[test]
    fn content_types_that_fit() {
        let css = Some("text/css; charset=utf-8");
        assert!(fits("/site/a.css", css));
        assert!(fits("/site/a.css?v=3", css));
        assert!(!fits(
            "/account.php/x.css",
            Some("text/html; charset=UTF-8")
        ));
        assert!(!fits("/account;x.css", Some("text/html")));
        assert!(!fits("/account.php%2Fx.css", Some("text/html")));
        assert!(
            !fits("/account.php?x.css", Some("text/html")),
            "a url rule's claim"
        );
        assert!(!fits("/account.php/x.css?", Some("text/html")));
        assert!(!fits("/logo.png", Some("image/jpeg")));
        assert!(
            fits("/index.php?p=1", Some("text/html; charset=UTF-8")),
            "a script's page"
        );
        assert!(fits("/api.php", Some("application/json")));
        assert!(fits("/info.php", None), "a script claims no type");
        assert!(!fits("/logo.png", None), "no type");
        assert!(fits("/logo.png", Some("application/octet-stream")));
        assert!(fits("/photo.jpeg", Some("image/jpg")));
        assert!(fits("/app.js", Some("application/javascript")));
        assert!(fits("/feed.json", Some("application/ld+json")));
        assert!(fits("/page", Some("text/html")), "no extension claimed");
        assert!(fits("/page.html", Some("text/html")));
        assert!(fits("/clip.xyz", Some("video/x-custom")));
        assert!(!fits("/x.xyz", Some("text/html")), "never an HTML page");
        assert!(fits("/Style.CSS", Some("TEXT/CSS")));
    }
}
