//! The Debian package, built from the debug binary `cargo test` already built (no release
//! build: fat LTO costs minutes on CI's 2 cores; `packaging/build-deb.sh` without `--binary`
//! is the release path; `--xz-level 1`: xz's default level took 38 s of CPU over the debug
//! binary, level 1 takes 5 s): contents (`dpkg-deb -c`), control data (`dpkg-deb -I`), `lintian`
//! (no tag left but those overridden with their reason), `systemd-analyze verify` and
//! `security` on the units. With `SHELLAC_PACKAGE_INSTALL=1` (set by `.ci/run`; it changes the
//! machine, so not by default on a developer's): `dpkg -i`, the user, directories, modes,
//! conffile, `man -w`, `shellac check` of the installed file, `systemd-analyze verify` of the
//! installed units, then `dpkg -r` (data kept) and `dpkg -P` (data and user gone).

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use common::binary::BIN;
use common::tools::{require, which};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands with a manual page of their own (what `shellac --help` lists).
fn subcommands() -> Vec<String> {
    let help = text(&run(Command::new(BIN).arg("--help")));
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn the_debian_package_builds_lints_installs_and_purges() {
    let tools = ["dpkg-deb", "lintian", "systemd-analyze", "man"];
    for tool in tools {
        let package = match tool {
            "dpkg-deb" => "dpkg",
            "systemd-analyze" => "systemd",
            "man" => "man-db",
            t => t,
        };
        if require(which(tool), tool, package).is_none() {
            return;
        }
    }
    let dir = common::temp_dir("package");
    let root = env!("CARGO_MANIFEST_DIR");
    let built = run(Command::new(format!("{root}/packaging/build-deb.sh"))
        .args(["--binary", BIN, "--xz-level", "1", "--out"])
        .arg(&dir));
    let deb = text(&built).trim().to_string();
    let size = std::fs::metadata(&deb).expect("the .deb").len();
    eprintln!("package: {deb}, {size} bytes");

    // Contents.
    let listing = text(&run(Command::new("dpkg-deb").args(["-c", &deb])));
    let mut expected = vec![
        "./usr/bin/shellac".to_string(),
        "./etc/shellac/shellac.toml".into(),
        "./etc/logrotate.d/shellac".into(),
        "./lib/systemd/system/shellac.service".into(),
        "./lib/systemd/system/shellac.socket".into(),
        "./usr/share/man/man8/shellac.8.gz".into(),
        "./usr/share/man/man5/shellac.toml.5.gz".into(),
        "./usr/share/man/man7/shellac-vcl.7.gz".into(),
        "./usr/share/bash-completion/completions/shellac".into(),
        "./usr/share/zsh/vendor-completions/_shellac".into(),
        "./usr/share/fish/vendor_completions.d/shellac.fish".into(),
        "./usr/share/doc/shellac/copyright".into(),
        "./usr/share/doc/shellac/changelog.Debian.gz".into(),
    ];
    let subs = subcommands();
    assert!(
        subs.iter().any(|s| s == "serve") && subs.len() > 8,
        "{subs:?}"
    );
    for sub in &subs {
        expected.push(format!("./usr/share/man/man8/shellac-{sub}.8.gz"));
    }
    for path in &expected {
        assert!(
            listing.lines().any(|l| l.ends_with(path.as_str())),
            "{path} missing from the package:\n{listing}"
        );
    }
    // Everything owned by root (dpkg-deb --root-owner-group).
    for line in listing.lines() {
        assert!(line.contains(" root/root "), "{line}");
    }

    // Control data.
    let info = text(&run(Command::new("dpkg-deb").args(["-I", &deb])));
    for field in [
        "Package: shellac",
        "Depends: libc6",
        "adduser",
        "Architecture: ",
    ] {
        assert!(info.contains(field), "{field} not in:\n{info}");
    }
    let maintainer = cargo_author();
    assert!(
        info.contains(&format!("Maintainer: {maintainer}\n")),
        "Maintainer is not Cargo.toml's first author ({maintainer}):\n{info}"
    );
    assert!(
        !info.contains("Homepage:"),
        "a Homepage field: the project has no public home page yet\n{info}"
    );
    let conffiles = text(&run(Command::new("dpkg-deb").args([
        "--info",
        &deb,
        "conffiles",
    ])));
    assert_eq!(
        conffiles.lines().collect::<Vec<_>>(),
        ["/etc/shellac/shellac.toml", "/etc/logrotate.d/shellac"]
    );

    // The copyright file: all rights reserved, as COPYRIGHT says (no license chosen yet).
    let tree_doc = dir.join("doc");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree_doc));
    let copyright =
        std::fs::read_to_string(tree_doc.join("usr/share/doc/shellac/copyright")).unwrap();
    assert!(
        copyright.contains(&format!("Upstream-Contact: {maintainer}\n"))
            && copyright.contains("License: all-rights-reserved\n All rights reserved."),
        "{copyright}"
    );
    std::fs::remove_dir_all(&tree_doc).ok();

    // Issue 32 (a lean shipped binary that keeps symbolised backtraces): the binary has no
    // debug sections but keeps its symbol table (backtraces name every function; the former
    // `--strip-unneeded` left bare addresses), and shellac-dbgsym beside the package holds the
    // sections under the binary's build ID, where backtraces and gdb find file:line.
    let tree_bin = dir.join("bin");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree_bin));
    let shipped = tree_bin.join("usr/bin/shellac");
    let sections = text(&run(Command::new("readelf")
        .arg("-S")
        .arg("-W")
        .arg(&shipped)));
    assert!(sections.contains(" .symtab "), "{sections}");
    assert!(
        !sections.contains(".debug_info") && !sections.contains(".debug_line"),
        "{sections}"
    );
    let notes = text(&run(Command::new("readelf").arg("-n").arg(&shipped)));
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build ID")
        .trim()
        .to_string();
    std::fs::remove_dir_all(&tree_bin).ok();
    let dbgsym = deb.replace("/shellac_", "/shellac-dbgsym_");
    let dbg_listing = text(&run(Command::new("dpkg-deb").args(["-c", &dbgsym])));
    assert!(
        dbg_listing.contains(&format!(
            "./usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        )),
        "{id}: {dbg_listing}"
    );
    let dbg_info = text(&run(Command::new("dpkg-deb").args(["-I", &dbgsym])));
    assert!(
        dbg_info.contains("Package: shellac-dbgsym")
            && dbg_info.contains("Depends: shellac (= ")
            && dbg_info.contains(&format!("Build-Ids: {id}")),
        "{dbg_info}"
    );

    // lintian: nothing left but what packaging/deb/lintian-overrides overrides (with reasons).
    let lint = Command::new("lintian")
        .args([
            "--pedantic",
            "--info",
            "--suppress-tags",
            "running-with-root-privileges",
        ])
        .arg(&deb)
        .output()
        .expect("run lintian");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    let tags: Vec<&str> = report
        .lines()
        .filter(|l| {
            ["E: ", "W: ", "I: ", "P: "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    assert!(tags.is_empty(), "lintian:\n{report}");

    // The units: systemd-analyze verify (the binary path pointed at the extracted one, manual
    // pages not looked up: they are not installed yet) and security (offline).
    let tree = dir.join("tree");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
    let units = dir.join("units");
    std::fs::create_dir_all(&units).unwrap();
    let binary = tree.join("usr/bin/shellac");
    for unit in ["shellac.service", "shellac.socket"] {
        let text = std::fs::read_to_string(tree.join("lib/systemd/system").join(unit)).unwrap();
        std::fs::write(
            units.join(unit),
            text.replace("/usr/bin/shellac", binary.to_str().unwrap()),
        )
        .unwrap();
    }
    run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(units.join("shellac.service"))
        .arg(units.join("shellac.socket")));
    let security = run(Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(units.join("shellac.service")));
    let security = text(&security);
    let score: f64 = security
        .lines()
        .find_map(|l| l.split("exposure level for shellac.service: ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{security}"));
    eprintln!("systemd-analyze security: exposure {score}");
    assert!(score <= 2.0, "exposure {score} (was 1.6):\n{security}");

    // The packaged configuration is the embedded default plus comments, and checks.
    let conf = tree.join("etc/shellac/shellac.toml");
    run(Command::new(BIN).args(["check", "--file-only"]).arg(&conf));

    if std::env::var("SHELLAC_PACKAGE_INSTALL").as_deref() == Ok("1") {
        install_remove_purge(&deb);
    } else {
        eprintln!(
            "dpkg -i / -r / -P skipped (SHELLAC_PACKAGE_INSTALL=1 runs them; .ci/run sets it)"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Cargo.toml's first author: the package's Maintainer and the changelog's signer.
fn cargo_author() -> String {
    let manifest = include_str!("../Cargo.toml");
    let line = manifest
        .lines()
        .find_map(|l| l.strip_prefix("authors = [\""))
        .expect("Cargo.toml has authors");
    line.split('"').next().unwrap_or_default().to_string()
}

#[test]
fn the_maintainer_and_the_license_are_stated_once_and_agree() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = include_str!("../Cargo.toml");
    let maintainer = cargo_author();
    let changelog = std::fs::read_to_string(format!("{root}/packaging/deb/changelog")).unwrap();
    for line in changelog.lines().filter(|l| l.starts_with(" -- ")) {
        assert!(
            line.starts_with(&format!(" -- {maintainer}  ")),
            "changelog signed by someone else than Cargo.toml's first author ({maintainer}): {line}"
        );
    }
    let control = std::fs::read_to_string(format!("{root}/packaging/deb/control")).unwrap();
    assert!(control.contains("Maintainer: @MAINTAINER@\n"), "{control}");
    // No license chosen yet: all rights reserved, in Cargo.toml (license-file), COPYRIGHT and
    // the package's copyright file alike; never published to a registry.
    assert!(manifest.contains("\nlicense-file = \"COPYRIGHT\"\n"));
    assert!(manifest.contains("\npublish = false\n"));
    assert!(!manifest.contains("\nlicense = "));
    let copyright = std::fs::read_to_string(format!("{root}/COPYRIGHT")).unwrap();
    assert!(copyright.contains("All rights reserved."), "{copyright}");
    let deb_copyright =
        std::fs::read_to_string(format!("{root}/packaging/deb/copyright.in")).unwrap();
    assert!(
        deb_copyright.contains("Files: *\nCopyright: the Shellac authors\nLicense: all-rights-reserved\n All rights reserved."),
        "{deb_copyright}"
    );
    // README's install section: the one command that builds the package, then the install.
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    for line in [
        "packaging/build-deb.sh",
        "apt install ./shellac_*.deb && systemctl enable --now shellac",
    ] {
        assert!(readme.contains(line), "README.md lacks `{line}`");
    }
}

fn owner_mode(path: &str) -> (String, u32) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let user = text(&run(
        Command::new("id").args(["-nu", &meta.uid().to_string()])
    ));
    (user.trim().to_string(), meta.permissions().mode() & 0o7777)
}

fn install_remove_purge(deb: &str) {
    // A previous run's leftovers would hide what this one does.
    let _ = Command::new("dpkg").args(["-P", "shellac"]).output();
    run(Command::new("dpkg").args(["-i", deb]));

    let passwd = text(&run(Command::new("getent").args(["passwd", "shellac"])));
    let fields: Vec<&str> = passwd.trim().split(':').collect();
    let uid: u32 = fields[2].parse().unwrap();
    assert!(uid < 1000, "a system user: {passwd}");
    assert_eq!(fields[6], "/usr/sbin/nologin", "{passwd}");
    for dir in ["/var/cache/shellac", "/var/log/shellac", "/var/lib/shellac"] {
        assert_eq!(owner_mode(dir), ("shellac".to_string(), 0o750), "{dir}");
    }
    assert_eq!(owner_mode("/usr/bin/shellac"), ("root".to_string(), 0o755));
    assert_eq!(
        owner_mode("/etc/shellac/shellac.toml"),
        ("root".to_string(), 0o644)
    );
    let conffiles = text(&run(Command::new("dpkg-query").args([
        "-W",
        "-f=${Conffiles}",
        "shellac",
    ])));
    assert!(
        conffiles.contains("/etc/shellac/shellac.toml"),
        "{conffiles}"
    );
    assert!(
        conffiles.contains("/etc/logrotate.d/shellac"),
        "{conffiles}"
    );
    let man = text(&run(Command::new("man").args(["-w", "shellac"])));
    assert_eq!(man.trim(), "/usr/share/man/man8/shellac.8.gz");
    for (section, page) in [
        ("5", "shellac.toml"),
        ("7", "shellac-vcl"),
        ("8", "shellac-serve"),
    ] {
        run(Command::new("man").args(["-w", section, page]));
    }
    run(Command::new("/usr/bin/shellac").args(["check", "/etc/shellac/shellac.toml"]));
    run(Command::new("systemd-analyze").args([
        "verify",
        "/lib/systemd/system/shellac.service",
        "/lib/systemd/system/shellac.socket",
    ]));
    if which("logrotate").is_some() {
        run(Command::new("logrotate").args(["--debug", "/etc/logrotate.d/shellac"]));
    }

    // Upgrade (the package installed over itself, as `apt install` of a new version does:
    // prerm/preinst `upgrade`, postinst `configure` with the old version): the operator's
    // edit of the conffile, the cache and the user are kept.
    let marker = "/var/cache/shellac/kept";
    std::fs::write(marker, "x").unwrap();
    let mut edited = std::fs::read_to_string("/etc/shellac/shellac.toml").unwrap();
    edited.push_str("\n# edited by the operator\n");
    std::fs::write("/etc/shellac/shellac.toml", &edited).unwrap();
    run(Command::new("dpkg")
        .args(["-i", deb])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(std::process::Stdio::null()));
    assert_eq!(
        std::fs::read_to_string("/etc/shellac/shellac.toml").unwrap(),
        edited,
        "the upgrade replaced the operator's configuration"
    );
    assert!(Path::new(marker).exists(), "the upgrade emptied the cache");
    let again = text(&run(Command::new("getent").args(["passwd", "shellac"])));
    assert_eq!(again.trim(), passwd.trim(), "the upgrade changed the user");
    for dir in ["/var/cache/shellac", "/var/log/shellac", "/var/lib/shellac"] {
        assert_eq!(owner_mode(dir), ("shellac".to_string(), 0o750), "{dir}");
    }

    // Remove: the program goes; configuration, data and the user stay.
    run(Command::new("dpkg").args(["-r", "shellac"]));
    assert!(!Path::new("/usr/bin/shellac").exists());
    assert!(Path::new("/etc/shellac/shellac.toml").exists());
    assert!(Path::new(marker).exists());
    run(Command::new("getent").args(["passwd", "shellac"]));

    // Purge: everything.
    run(Command::new("dpkg").args(["-P", "shellac"]));
    for gone in [
        "/etc/shellac/shellac.toml",
        "/var/cache/shellac",
        "/var/log/shellac",
        "/var/lib/shellac",
    ] {
        assert!(!Path::new(gone).exists(), "{gone} left after purge");
    }
    let user = Command::new("getent")
        .args(["passwd", "shellac"])
        .output()
        .unwrap();
    assert!(!user.status.success(), "the shellac user left after purge");
}
