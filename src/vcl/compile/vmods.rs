//! The VMODs a program may import, by name.

/// A VMOD as imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Vmod {
    Std,
    Directors,
    Cookie,
    /// vmod_purge: `purge.hard()`, `purge.soft()` in vcl_hit / vcl_miss.
    Purge,
    /// vmod_blob's functions (not its `blob.blob()` objects).
    Blob,
    /// vmod_xkey (varnish-modules): `xkey.purge()`, `xkey.softpurge()` on Shellac's
    /// surrogate-key index.
    Xkey,
    /// vmod_vsthrottle (varnish-modules): `is_denied`, `remaining`, `blocked`,
    /// `return_token` on the proxy's rate-limit buckets.
    Vsthrottle,
    /// Anything else: refused at the import.
    Other(String),
}

impl Vmod {
    pub(super) fn by_name(name: &str) -> Vmod {
        match name {
            "std" => Vmod::Std,
            "directors" => Vmod::Directors,
            "cookie" => Vmod::Cookie,
            "purge" => Vmod::Purge,
            "blob" => Vmod::Blob,
            "xkey" => Vmod::Xkey,
            "vsthrottle" => Vmod::Vsthrottle,
            other => Vmod::Other(other.to_string()),
        }
    }

    pub(super) fn prefix(&self) -> &str {
        match self {
            Vmod::Std => "std",
            Vmod::Directors => "directors",
            Vmod::Cookie => "cookie",
            Vmod::Purge => "purge",
            Vmod::Blob => "blob",
            Vmod::Xkey => "xkey",
            Vmod::Vsthrottle => "vsthrottle",
            Vmod::Other(n) => n,
        }
    }
}
