//! The grammar of variant names: the union of what the supported releases
//! of the hub loader parse (kernels 0.19's, a superset of the older ones').
//! Each branch settles the framework part, and with it whether the name is
//! legacy or dotted; the rest is split from the end: `<cpu>-<os>`, then
//! `cpython-<X.Y>-<abi>` in dotted names, then the backend.

use super::version::{Split as Digits, Version};
use super::{
    Backend, Cpu, Framework, NoarchBackend, NoarchFramework, OrOther, Os, PythonTag, Sdk,
    VariantName,
};

/// Parse `name`, or say which part does not fit.
pub(super) fn name(name: &str) -> Result<VariantName, String> {
    let parts: Vec<&str> = name.split('-').collect();
    let (framework, dotted, rest) = if parts[0] == "sdk" {
        return sdk(&parts[1..]).map(VariantName::Sdk);
    } else if name.starts_with("torch-stable-abi") {
        let dotted = parts.len() > 3 && parts[2] == "abi";
        let version = if dotted {
            dotted_version(parts[3], "stable ABI")?
        } else {
            fused(&parts[2]["abi".len()..], "stable ABI")?
        };
        let n = if dotted { 4 } else { 3 };
        (
            Framework::TorchStableAbi { version },
            dotted,
            &parts[n.min(parts.len())..],
        )
    } else if parts[0] == "torch"
        && parts
            .get(1)
            .is_some_and(|p| p.starts_with(|c: char| c.is_ascii_digit()))
    {
        let version = dotted_version(parts[1], "torch")?;
        let (cxx11_abi, n) = cxx_tag(parts.get(2), 2);
        (Framework::Torch { version, cxx11_abi }, true, &parts[n..])
    } else if parts[0] == "torch"
        || (parts[0] == "mlx"
            && parts
                .get(1)
                .is_some_and(|p| !p.starts_with(|c: char| c.is_ascii_digit())))
    {
        let framework = if parts[0] == "torch" {
            NoarchFramework::Torch
        } else {
            NoarchFramework::Mlx
        };
        return Ok(VariantName::Noarch {
            framework,
            backend: named_backend(&parts[1..].join("-"))?,
        });
    } else if let Some(digits) = parts[0].strip_prefix("torch") {
        let version = fused(digits, "torch")?;
        let (cxx11_abi, n) = cxx_tag(parts.get(1), 1);
        (Framework::Torch { version, cxx11_abi }, false, &parts[n..])
    } else if parts[0] == "tvm" && parts.get(1).is_some_and(|p| p.starts_with("ffi")) {
        let dotted = parts.len() > 2 && parts[1] == "ffi";
        let version = if dotted {
            dotted_version(parts[2], "tvm-ffi")?
        } else {
            fused(&parts[1]["ffi".len()..], "tvm-ffi")?
        };
        let n = if dotted { 3 } else { 2 };
        (Framework::TvmFfi { version }, dotted, &parts[n..])
    } else {
        return Err(
            "unknown framework (expected torch, torch-stable-abi, tvm-ffi, mlx or sdk)".into(),
        );
    };
    let after = rest.join("-");
    let (rest, cpu, os) = system(rest)?;
    let (backend, python) = if dotted {
        let (backend, python) =
            python(rest)?.ok_or("a dotted name needs cpython-<X.Y>-<abi> before <cpu>-<os>")?;
        if backend.is_empty() {
            return Err("no backend after the framework".into());
        }
        (Backend::parse_dotted(backend)?, Some(python))
    } else {
        let [backend] = rest else {
            return Err(format!(
                "expected <backend>-<cpu>-<os> after the framework, found {after:?}"
            ));
        };
        (backend.parse()?, None)
    };
    Ok(VariantName::Arch {
        framework,
        backend,
        python,
        cpu,
        os,
    })
}

/// `sdk`, `sdk-<backend>`, `sdk[-<backend>]-cpython-<X.Y>-<abi>-<cpu>-<os>`
/// (what follows `sdk`).
fn sdk(rest: &[&str]) -> Result<Sdk, String> {
    if rest.contains(&"cpython") {
        let (rest, cpu, os) = system(rest)?;
        let (backend, python) =
            python(rest)?.ok_or("cpython-<X.Y>-<abi> must come before <cpu>-<os>")?;
        let backend = match backend {
            [] => None,
            parts => Some(Backend::parse_dotted(parts)?),
        };
        return Ok(Sdk::Compiled {
            backend,
            python,
            cpu,
            os,
        });
    }
    match rest {
        [] => Ok(Sdk::Any),
        [backend] => Ok(Sdk::For(named_backend(backend)?)),
        _ => Err("an SDK without compiled parts is sdk or sdk-<backend>".into()),
    }
}

/// The parts before `<cpu>-<os>`, and those two.
type Split<'a> = (&'a [&'a str], OrOther<Cpu>, OrOther<Os>);

/// Split `<cpu>-<os>` off the end.
fn system<'a>(parts: &'a [&'a str]) -> Result<Split<'a>, String> {
    match parts {
        [rest @ .., cpu, os] if !cpu.is_empty() && !os.is_empty() => {
            Ok((rest, OrOther::from_name(cpu), OrOther::from_name(os)))
        }
        _ => Err(format!(
            "expected <backend>-<cpu>-<os> after the framework, found {:?}",
            parts.join("-")
        )),
    }
}

/// Split `cpython-<X.Y>-<abi>` off the end of a dotted name's backend
/// parts, from its first `cpython`; `None` when there is none.
fn python<'a>(parts: &'a [&'a str]) -> Result<Option<(&'a [&'a str], PythonTag)>, String> {
    let Some(at) = parts.iter().position(|p| *p == "cpython") else {
        return Ok(None);
    };
    Ok(Some((&parts[..at], PythonTag::parse(&parts[at..])?)))
}

/// A backend as noarch and SDK names spell it: any non-empty word.
fn named_backend(name: &str) -> Result<OrOther<NoarchBackend>, String> {
    if name.is_empty() {
        return Err("no backend after the framework".into());
    }
    Ok(OrOther::from_name(name))
}

/// The optional `cxx11` / `cxx98` tag at `parts[at]`, and where the rest
/// begins.
fn cxx_tag(part: Option<&&str>, at: usize) -> (Option<bool>, usize) {
    match part {
        Some(&"cxx11") => (Some(true), at + 1),
        Some(&"cxx98") => (Some(false), at + 1),
        _ => (None, at),
    }
}

fn fused(digits: &str, what: &str) -> Result<Version, String> {
    Version::parse_fused(digits, Digits::OneDigitMajor)
        .ok_or_else(|| format!("{what} version {digits:?} is not two or more digits"))
}

fn dotted_version(text: &str, what: &str) -> Result<Version, String> {
    Version::parse_dotted(text)
        .ok_or_else(|| format!("{what} version {text:?} is not of the form X.Y"))
}
