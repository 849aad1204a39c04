//! `shellac check`: a configuration file (or a VCL file) checked as `serve` would check it,
//! what the machine says about it, and with `--online` what its origins answer.

use std::process::ExitCode;

use shellac::config::{Config, ConfigError};

/// Every error, one line each, on stderr.
pub(super) fn print_errors(errors: &[ConfigError]) {
    for e in errors {
        eprintln!("error: {e}");
    }
}

/// `shellac check`: the file, then (unless `file_only`) what the machine says about it (the
/// same checks `serve` runs before it starts), every error in one run.
pub(super) fn check(file: &std::path::Path, file_only: bool, online: bool) -> ExitCode {
    if file.extension().is_some_and(|e| e == "vcl") {
        return check_vcl(file);
    }
    let name = file.display().to_string();
    let mut policy = None;
    let (config, mut errors, mut warnings) = match std::fs::read_to_string(file) {
        Ok(text) => {
            let (mut config, mut errors) = Config::read(&text, &name);
            // `[vcl] file`: compiled, every error in it reported too.
            if let Some(c) = config.as_mut() {
                c.relative_to(file.parent().unwrap_or(std::path::Path::new(".")));
                match shellac::vcl::attach::attach(c, None) {
                    Ok(program) => {
                        policy = c
                            .vcl
                            .file
                            .as_deref()
                            .zip(program.global)
                            .map(|(f, p)| shellac::vcl::attach::describe(f, &p));
                    }
                    Err(vcl) => {
                        errors.extend(vcl);
                        config = None;
                    }
                }
            }
            // A file read as written is checked against the machine even when checks across
            // its settings failed: everything `serve` would refuse, in one run.
            let mut warnings = Vec::new();
            if let Some(config) = &config
                && !file_only
            {
                let (machine, warned) = shellac::preflight::check_machine(config, &text, &name);
                errors.extend(machine);
                warnings = warned;
            }
            (config, errors, warnings)
        }
        Err(e) => (
            None,
            vec![ConfigError {
                file: name.clone(),
                line: 0,
                column: 0,
                key: String::new(),
                message: format!("cannot read config file: {e}"),
            }],
            Vec::new(),
        ),
    };
    errors.sort_by_key(|e| (e.line, e.column));
    warnings.sort_by_key(|e| (e.line, e.column));
    if online && let Some(config) = &config {
        errors.extend(check_online(config, &name));
    }
    print_errors(&errors);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    match config {
        Some(config) if errors.is_empty() => {
            say!("{}: OK", file.display());
            say!("  {}", config.summary(policy.as_deref()));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "{}: {} error{}",
                file.display(),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
            ExitCode::FAILURE
        }
    }
}

/// One `--online` probe under way: Ok with what passed, in words ("" when nothing to add).
type Probe = tokio::task::JoinHandle<Result<String, String>>;

/// `shellac check --online`: asks every backend what its probe asks (or `HEAD /`), as its
/// origin kind asks it (TLS, HTTP/2, FastCGI, a document root), connects to the Redis cluster
/// and every ACME directory, all at once (each within its own deadline), prints what answered
/// and returns an error for each that could not be reached, refused or answered wrong.
fn check_online(config: &Config, file: &str) -> Vec<ConfigError> {
    let error = |key: String, message: String| ConfigError {
        file: file.to_string(),
        line: 0,
        column: 0,
        key,
        message,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return vec![error(String::new(), format!("--online: {e}"))],
    };
    runtime.block_on(async {
        let mut probes: Vec<(String, String, Probe)> = Vec::new();
        let counters = std::sync::Arc::new(shellac::stats::Counters::default());
        for (i, b) in config.backends.iter().enumerate() {
            let backend = shellac::backend::Backend::new(b.clone(), config, counters.clone());
            probes.push((
                format!("backend.{i}"),
                format!("backend `{}` ({})", b.name, backend.address()),
                tokio::spawn(async move { shellac::backend::probe::check(&backend).await }),
            ));
        }
        if let Some(s) = &config.storage.shared {
            let options = shellac::cache::shared::remote::Options {
                nodes: s.nodes.clone(),
                username: s.username.clone(),
                password: s.password.clone(),
                tls: s.tls.clone(),
                connect_timeout: s.connect_timeout.0,
                response_timeout: s.write_timeout.0,
            };
            probes.push((
                "storage.shared".into(),
                format!("the Redis cluster ({})", s.nodes.join(", ")),
                tokio::spawn(async move {
                    shellac::cache::shared::remote::probe(&options)
                        .await
                        .map(|()| String::new())
                }),
            ));
        }
        for (i, t) in config.tls.iter().enumerate() {
            for (j, a) in t.acme.iter().enumerate() {
                let (directory, ca_root) = (a.directory.clone(), a.ca_root.clone());
                probes.push((
                    format!("tls.{i}.acme.{j}.directory"),
                    format!("the ACME directory {directory}"),
                    tokio::spawn(async move {
                        shellac::acme::reach_directory(&directory, ca_root.as_deref())
                            .await
                            .map(|()| String::new())
                    }),
                ));
            }
        }
        let mut errors = Vec::new();
        for (key, what, probe) in probes {
            match probe.await {
                Ok(Ok(detail)) if detail.is_empty() => say!("online: {what}: OK"),
                Ok(Ok(detail)) => say!("online: {what}: OK ({detail})"),
                Ok(Err(e)) => errors.push(error(key, format!("{what}: {e}"))),
                Err(e) => errors.push(error(key, format!("{what}: {e}"))),
            }
        }
        errors
    })
}

/// `shellac check site.vcl`: every error of a VCL file (and its includes), or a summary.
fn check_vcl(file: &std::path::Path) -> ExitCode {
    match shellac::vcl::compile_file(file) {
        Ok(p) => {
            say!("{}: OK", file.display());
            let o = &p.origins;
            let backends: Vec<String> = o
                .backends
                .iter()
                .map(|b| format!("{} → {}:{}", b.name, b.host, b.port))
                .collect();
            let directors: Vec<String> = o.directors.iter().map(|d| d.describe()).collect();
            let subs: Vec<&str> = p.defined.iter().map(|m| m.sub_name()).collect();
            say!(
                "  VCL {}; backends: {}; directors: {}; probes: {}; ACLs: {}; subroutines: {}",
                p.dialect.as_str(),
                if backends.is_empty() {
                    "none".to_string()
                } else {
                    backends.join(", ")
                },
                if directors.is_empty() {
                    "none".to_string()
                } else {
                    directors.join(", ")
                },
                o.probes.len(),
                p.acls.len(),
                subs.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                let e = shellac::vcl::attach::error(e.clone());
                eprintln!("error: {e}");
            }
            eprintln!(
                "{}: {} error{}",
                file.display(),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
            ExitCode::FAILURE
        }
    }
}
