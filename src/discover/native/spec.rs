//! What a native target asks of the cuda executor: a module file and the
//! smoke launches to run from it. Plain data, produced by
//! [`super::parse`] (which validated every value) and consumed by the
//! cuda executor's child, which checks only what depends on the device.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A module file and how to turn it into something the driver loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleSpec {
    /// The file (absolute, or relative to the child's working directory).
    pub path: PathBuf,
    /// What the file holds.
    pub kind: ModuleKind,
    /// For CUDA C source: extra NVRTC options (`-std=c++17`, `-DN=4`, …).
    #[serde(default)]
    pub nvrtc_options: Vec<String>,
    /// For CUDA C source: the target NVRTC compiles for (`sm_90a`,
    /// `compute_80`); `None`: this device's `sm_XY`, or NVRTC's default
    /// PTX target when no device answers.
    #[serde(default)]
    pub target: Option<String>,
}

impl ModuleSpec {
    /// The module's file name, as reports show it.
    pub fn name(&self) -> String {
        self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

/// The kinds of module file the driver API can load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleKind {
    /// A cubin: SASS for one architecture.
    Cubin,
    /// PTX text, compiled by the driver's JIT at load time.
    Ptx,
    /// A fatbinary holding several cubins and/or PTX.
    Fatbin,
    /// CUDA C++ source (`.cu`), compiled with NVRTC in the child.
    Cuda,
}

impl ModuleKind {
    /// The kind a file name's extension implies.
    pub fn from_extension(ext: &str) -> Option<ModuleKind> {
        match ext {
            "cubin" => Some(ModuleKind::Cubin),
            "ptx" => Some(ModuleKind::Ptx),
            "fatbin" => Some(ModuleKind::Fatbin),
            "cu" => Some(ModuleKind::Cuda),
            _ => None,
        }
    }

    /// Its name as written in `preflight.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleKind::Cubin => "cubin",
            ModuleKind::Ptx => "ptx",
            ModuleKind::Fatbin => "fatbin",
            ModuleKind::Cuda => "cuda",
        }
    }
}

/// One kernel launch: which function, its shape, its arguments, and how
/// often to time it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The kernel's symbol name (`extern "C"` names, or the mangled name).
    pub function: String,
    /// Grid dimensions in blocks.
    pub grid: [u32; 3],
    /// Block dimensions in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes.
    #[serde(default)]
    pub shared_mem_bytes: u32,
    /// Kernel arguments, in parameter order.
    pub args: Vec<Arg>,
    /// Untimed launches after verification and before timing.
    pub warmup: u32,
    /// Timed launches, each between two CUDA events.
    pub iterations: u32,
}

/// One kernel argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "arg", rename_all = "snake_case", deny_unknown_fields)]
pub enum Arg {
    /// A value passed by value.
    Scalar {
        /// Its type.
        ty: ElemType,
        /// Its value (exactly representable in `ty`, checked by the parent).
        value: f64,
    },
    /// A device buffer, passed as a pointer: filled from `init` before the
    /// first launch, compared with `expect` after it.
    Buffer {
        /// Element type.
        ty: ElemType,
        /// Initial contents; its length is the buffer's length.
        init: Vec<f64>,
        /// Expected contents after the first launch; `None`: not checked.
        expect: Option<Vec<f64>>,
        /// How close each element must be to what was expected.
        tolerance: Tolerance,
    },
}

/// `|got - want| <= atol + rtol * |want|`, as numpy's `allclose`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

impl Tolerance {
    /// Exact equality.
    pub const EXACT: Tolerance = Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };

    /// The default for an element type: exact for integers, `1e-5` absolute
    /// and relative for floating point.
    pub fn default_for(ty: ElemType) -> Tolerance {
        if ty.is_float() {
            Tolerance {
                atol: 1e-5,
                rtol: 1e-5,
            }
        } else {
            Tolerance::EXACT
        }
    }

    /// Whether `got` is close enough to `want`.
    pub fn accepts(&self, got: f64, want: f64) -> bool {
        if got == want {
            return true;
        }
        (got - want).abs() <= self.atol + self.rtol * want.abs()
    }
}

/// Element types of scalars and buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElemType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 8-bit unsigned integer.
    U8,
    /// 32-bit signed integer.
    I32,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit signed integer.
    I64,
    /// 64-bit unsigned integer.
    U64,
}

impl ElemType {
    /// Every type, in the order the documentation lists them.
    pub const ALL: [ElemType; 7] = [
        ElemType::F32,
        ElemType::F64,
        ElemType::U8,
        ElemType::I32,
        ElemType::U32,
        ElemType::I64,
        ElemType::U64,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            ElemType::U8 => 1,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
        }
    }

    /// Whether the type is floating point.
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F64)
    }

    /// Its name as written in `preflight.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::U8 => "u8",
            ElemType::I32 => "i32",
            ElemType::U32 => "u32",
            ElemType::I64 => "i64",
            ElemType::U64 => "u64",
        }
    }

    /// Why `value` cannot be stored in this type without change, if it cannot.
    pub fn check(self, value: f64) -> Result<(), String> {
        if !value.is_finite() && !self.is_float() {
            return Err(format!("{value} is not a valid {}", self.as_str()));
        }
        let (lo, hi) = match self {
            ElemType::F32 | ElemType::F64 => return Ok(()),
            ElemType::U8 => (0.0, u8::MAX as f64),
            ElemType::I32 => (i32::MIN as f64, i32::MAX as f64),
            ElemType::U32 => (0.0, u32::MAX as f64),
            // Beyond 2^53 an f64 no longer holds every integer.
            ElemType::I64 => (-(2f64.powi(53)), 2f64.powi(53)),
            ElemType::U64 => (0.0, 2f64.powi(53)),
        };
        if value.fract() != 0.0 {
            Err(format!("{value} is not an integer ({})", self.as_str()))
        } else if value < lo || value > hi {
            Err(format!("{value} is out of range for {}", self.as_str()))
        } else {
            Ok(())
        }
    }

    /// `value` as little-endian bytes of this type (saturating; values
    /// were checked with [`ElemType::check`]).
    pub fn encode(self, value: f64, out: &mut Vec<u8>) {
        match self {
            ElemType::F32 => out.extend_from_slice(&(value as f32).to_le_bytes()),
            ElemType::F64 => out.extend_from_slice(&value.to_le_bytes()),
            ElemType::U8 => out.push(value as u8),
            ElemType::I32 => out.extend_from_slice(&(value as i32).to_le_bytes()),
            ElemType::U32 => out.extend_from_slice(&(value as u32).to_le_bytes()),
            ElemType::I64 => out.extend_from_slice(&(value as i64).to_le_bytes()),
            ElemType::U64 => out.extend_from_slice(&(value as u64).to_le_bytes()),
        }
    }

    /// The element at the start of `bytes` (which holds at least
    /// [`ElemType::size`] bytes).
    pub fn decode(self, bytes: &[u8]) -> f64 {
        fn take<const N: usize>(bytes: &[u8]) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&bytes[..N]);
            a
        }
        match self {
            ElemType::F32 => f32::from_le_bytes(take(bytes)) as f64,
            ElemType::F64 => f64::from_le_bytes(take(bytes)),
            ElemType::U8 => bytes[0] as f64,
            ElemType::I32 => i32::from_le_bytes(take(bytes)) as f64,
            ElemType::U32 => u32::from_le_bytes(take(bytes)) as f64,
            ElemType::I64 => i64::from_le_bytes(take(bytes)) as f64,
            ElemType::U64 => u64::from_le_bytes(take(bytes)) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_bytes() {
        for ty in ElemType::ALL {
            for v in [0.0, 1.0, 7.0, 200.0] {
                let mut bytes = Vec::new();
                ty.encode(v, &mut bytes);
                assert_eq!(bytes.len(), ty.size());
                assert_eq!(ty.decode(&bytes), v, "{ty:?}");
            }
        }
        let mut bytes = Vec::new();
        ElemType::I32.encode(-5.0, &mut bytes);
        assert_eq!(ElemType::I32.decode(&bytes), -5.0);
    }

    #[test]
    fn integer_types_reject_fractions_and_overflow() {
        assert!(ElemType::U8.check(256.0).is_err());
        assert!(ElemType::U32.check(-1.0).is_err());
        assert!(ElemType::I32.check(1.5).is_err());
        assert!(ElemType::I64.check(f64::NAN).is_err());
        assert!(ElemType::F32.check(1.5).is_ok());
        assert!(ElemType::U64.check(2f64.powi(53)).is_ok());
    }

    #[test]
    fn tolerance_is_allclose() {
        let t = Tolerance {
            atol: 0.0,
            rtol: 0.01,
        };
        assert!(t.accepts(101.0, 100.0));
        assert!(!t.accepts(102.0, 100.0));
        assert!(Tolerance::EXACT.accepts(3.0, 3.0));
        assert!(!Tolerance::EXACT.accepts(3.0, 3.000001));
        assert!(!Tolerance::default_for(ElemType::F32).accepts(f64::NAN, 1.0));
    }
}
