//! nginx side by side with Shellac: its configuration, its cache on disk, its cache loader
//! watched, and its fills and restarts.

use super::*;

// ---------------------------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------------------------

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// nginx as in bench/run.sh (one worker, `user www-data` as root, every path in `prefix`),
/// with `proxy_cache_path levels=1:2` and `max_size`.
pub(super) fn write_nginx_config(prefix: &Path, origin: SocketAddr, port: u16, max_size_mib: u64) {
    // SAFETY: geteuid has no preconditions and touches no memory of ours.
    let user = if unsafe { libc::geteuid() } == 0 {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        if passwd.lines().any(|l| l.starts_with("www-data:")) {
            "user www-data www-data;"
        } else {
            "user nobody nogroup;"
        }
    } else {
        ""
    };
    let p = prefix.display();
    let conf = format!(
        r#"{user}
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log notice;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path {p}/client_body;
    proxy_temp_path       {p}/proxy;
    fastcgi_temp_path     {p}/fastcgi;
    uwsgi_temp_path       {p}/uwsgi;
    scgi_temp_path        {p}/scgi;

    # levels=1:2 as in incident 1; the zone holds ~8,000 keys per MiB; inactive long enough
    # that nothing ages out during the run; the cache manager evicts (LRU) above max_size.
    proxy_cache_path {p}/cache levels=1:2 keys_zone=bench:128m
                     max_size={max_size_mib}m inactive=7d use_temp_path=off;

    upstream origin {{
        server 127.0.0.1:{origin_port};
        keepalive 32;
    }}

    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_valid 200 1d;
            add_header X-Cache-Status $upstream_cache_status always;
        }}
    }}
}}
"#,
        origin_port = origin.port()
    );
    std::fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
}

/// (files, KiB allocated) of the nginx cache tree (`du`, outside any measured window).
pub(super) fn cache_usage(dir: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut kib = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                kib += m.blocks() / 2;
            }
        }
    }
    (files, kib)
}

/// Watches for nginx's cache loader process: (appeared, exited) since spawn; waits at most
/// `limit` from now for it to exit.
pub(super) fn watch_loader(p: &Proc, limit: Duration) -> (Option<Duration>, Option<Duration>) {
    let deadline = Instant::now() + limit;
    let mut seen: Option<(u32, Duration)> = None;
    loop {
        let loader = descendants(p.pid()).into_iter().find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("cache loader"))
        });
        match (loader, seen) {
            (Some(pid), None) => seen = Some((pid, p.started.elapsed())),
            (None, Some((_, at))) => return (Some(at), Some(p.started.elapsed())),
            _ => {}
        }
        if Instant::now() >= deadline {
            return (seen.map(|s| s.1), None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(super) async fn bench_nginx(ctx: &Ctx, bin: &Path, loader_wait: Duration) {
    let prefix = ctx.dir.join("nginx");
    std::fs::create_dir_all(&prefix).expect("nginx dir");
    std::fs::set_permissions(&prefix, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let data_mib = ctx.body_bytes / (1 << 20);
    let (big, small) = ((data_mib * 2).max(256), (data_mib / 2).max(64));
    let port = free_port();

    // N1: fill, max_size twice the data (nothing evicted): the no-eviction baseline.
    write_nginx_config(&prefix, ctx.origin, port, big);
    let mut p = Proc::nginx(bin, &prefix, port, ctx.pin);
    let f = measured_fill(&p, ctx.paths.clone(), &ctx.dir).await;
    let (files, kib) = cache_usage(&prefix.join("cache"));
    println!(
        "{} cache files {files}, {:.1} MiB allocated |",
        fill_row(
            &format!("nginx N1 fill, max_size {big}m (no eviction)"),
            &f,
            ctx.body_bytes
        ),
        kib as f64 / 1024.0
    );
    p.crash();

    // N2/N3: restart after kill -9 (master and workers), then after a clean stop (SIGQUIT).
    for label in [
        "nginx N2 restart after kill -9",
        "nginx N3 restart after clean stop",
    ] {
        let dropped = maybe_drop_caches();
        let mut p = Proc::nginx(bin, &prefix, port, ctx.pin);
        let r = run(p.proxy, ctx.shuffled.clone()).await;
        let row = replay_row(label, &p, &r, dropped);
        let (started, done) = if loader_wait.is_zero() {
            (None, None)
        } else {
            let wait = loader_wait;
            tokio::task::block_in_place(|| watch_loader(&p, wait))
        };
        println!(
            "{row} cache loader finished (process exited) {} s after spawn{} |",
            done.map_or(
                format!("not within the {} s wait", loader_wait.as_secs()),
                |d| { format!("{:.1}", d.as_secs_f64()) }
            ),
            if started.is_none() && !loader_wait.is_zero() {
                " (loader process never seen)"
            } else {
                ""
            },
        );
        p.stop();
    }
    let _ = std::fs::remove_dir_all(prefix.join("cache"));

    // N4: fill with max_size half the data: the cache manager evicts throughout.
    write_nginx_config(&prefix, ctx.origin, port, small);
    let mut p = Proc::nginx(bin, &prefix, port, ctx.pin);
    let f = measured_fill(&p, ctx.paths.clone(), &ctx.dir).await;
    let (files, kib) = cache_usage(&prefix.join("cache"));
    println!(
        "{} cache files {files}, {:.1} MiB allocated at the end |",
        fill_row(
            &format!("nginx N4 fill, max_size {small}m (cache manager evicting)"),
            &f,
            ctx.body_bytes
        ),
        kib as f64 / 1024.0
    );
    // Not a clean stop: a graceful one waits for the cache loader, still in its 60 s delay.
    p.crash();
    let _ = std::fs::remove_dir_all(&prefix);
}

pub(super) fn find_nginx() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("NGINX") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"])
        .map(|d| Path::new(d).join("nginx"))
        .find(|p| p.is_file())
}
