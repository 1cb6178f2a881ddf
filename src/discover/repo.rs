//! A kernel repo on disk, in the hub's layout: its variants in `build/`,
//! its smoke scripts in `benchmarks/` (the hub's benchmark convention).
//! The one place that rule lives: discovery, smoke choice, smoke identity,
//! the warm path's witnesses and the sandbox's read-only kernel files all
//! ask [`KernelRepo`].

use std::path::{Path, PathBuf};

/// The folder of a kernel repo's variants.
pub const VARIANTS: &str = "build";
/// The folder of a kernel repo's benchmark scripts.
pub const BENCHMARKS: &str = "benchmarks";

/// A kernel repo: the folder above `build/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRepo {
    dir: PathBuf,
}

impl KernelRepo {
    /// The repo at `dir`, taken as given.
    pub fn from_dir(dir: &Path) -> KernelRepo {
        KernelRepo {
            dir: dir.to_path_buf(),
        }
    }

    /// The repo at `dir`, when it has a `build/` folder.
    pub fn at(dir: &Path) -> Option<KernelRepo> {
        crate::seen::is_dir(&dir.join(VARIANTS)).then(|| KernelRepo {
            dir: dir.to_path_buf(),
        })
    }

    /// The repo whose variants folder is `variants`, when that is named
    /// `build` (read from the path alone).
    pub fn above_variants(variants: &Path) -> Option<KernelRepo> {
        (variants.file_name()? == VARIANTS)
            .then(|| variants.parent())
            .flatten()
            .map(|dir| KernelRepo {
                dir: dir.to_path_buf(),
            })
    }

    /// The repo of the variant folder `variant` (`<repo>/build/<variant>`).
    pub fn of_variant(variant: &Path) -> Option<KernelRepo> {
        KernelRepo::above_variants(variant.parent()?)
    }

    /// The repo's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its variants folder, `build/`.
    pub fn variants(&self) -> PathBuf {
        self.dir.join(VARIANTS)
    }

    /// Its benchmarks folder, `benchmarks/`.
    pub fn benchmarks(&self) -> PathBuf {
        self.dir.join(BENCHMARKS)
    }

    /// Whether `benchmarks/` holds a script the hub's convention runs
    /// (`benchmark*.py`): then the repo's own benchmarks are its smoke.
    pub fn has_benchmark_scripts(&self) -> bool {
        crate::seen::names(&self.benchmarks()).iter().any(|name| {
            let name = name.to_string_lossy();
            name.starts_with("benchmark") && name.ends_with(".py")
        })
    }
}

/// Every Python file in a benchmarks folder, sorted: what a benchmarks
/// smoke is made of (a script may import its neighbours), so what its
/// identity holds and its warm record watches.
pub fn benchmark_sources(benchmarks: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(benchmarks)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    crate::seen::listing(benchmarks, None);
    scripts.sort();
    Ok(scripts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repo_is_the_parent_of_build_and_holds_benchmarks() {
        let tmp = tempfile::tempdir().unwrap();
        let variant = tmp.path().join("build/torch-universal");
        std::fs::create_dir_all(&variant).unwrap();
        let repo = KernelRepo::of_variant(&variant).unwrap();
        assert_eq!(repo.dir(), tmp.path());
        assert_eq!(KernelRepo::at(tmp.path()), Some(repo.clone()));
        assert_eq!(
            KernelRepo::above_variants(&repo.variants()),
            Some(repo.clone())
        );
        assert_eq!(KernelRepo::of_variant(tmp.path()), None);
        assert!(KernelRepo::at(&variant).is_none());

        assert!(!repo.has_benchmark_scripts());
        std::fs::create_dir_all(repo.benchmarks()).unwrap();
        std::fs::write(repo.benchmarks().join("helpers.py"), "").unwrap();
        assert!(
            !repo.has_benchmark_scripts(),
            "a helper alone is no benchmark"
        );
        std::fs::write(repo.benchmarks().join("benchmark_relu.py"), "").unwrap();
        assert!(repo.has_benchmark_scripts());
        let names: Vec<_> = benchmark_sources(&repo.benchmarks())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["benchmark_relu.py", "helpers.py"]);
    }
}
