//! Child side: one `preflight.toml` launch made ready to run — its kernel
//! looked up, its buffers uploaded, its parameters packed — so that the
//! smoke can run it once and the bench mode many times, and both verify
//! its buffers the same way.

use super::driver::{self, DeviceBuffer, Driver, Module};
use super::request::{Arg, Launch};
use crate::protocol::Failure;
use std::ffi::c_void;

/// A launch ready to run: what the driver reads through `params` stays put
/// as long as this does.
pub(super) struct Prepared<'l> {
    pub(super) launch: &'l Launch,
    function: driver::Function,
    /// Each parameter in its own 8-byte-aligned slot. The driver reads
    /// them through `params`: the vector is filled once and never grows,
    /// so its buffer stays put when the struct moves.
    _slots: Vec<u64>,
    params: Vec<*mut c_void>,
    /// The buffers, by argument index, with their initial bytes.
    buffers: Vec<(usize, DeviceBuffer, Vec<u8>)>,
}

impl<'l> Prepared<'l> {
    /// Look `launch`'s kernel up in `module`, allow its shared memory, and
    /// upload its buffers.
    pub(super) fn new(
        driver: &Driver,
        module: &Module,
        launch: &'l Launch,
    ) -> Result<Prepared<'l>, Failure> {
        let function = module.function(&launch.function)?;
        allow_shared_memory(driver, function, launch)?;
        let mut slots: Vec<u64> = Vec::with_capacity(launch.args.len());
        let mut buffers = Vec::new();
        for (index, arg) in launch.args.iter().enumerate() {
            let slot = match arg {
                Arg::Scalar { ty, value } => {
                    let mut bytes = Vec::with_capacity(8);
                    ty.encode(*value, &mut bytes);
                    let mut word = [0u8; 8];
                    word[..bytes.len()].copy_from_slice(&bytes);
                    u64::from_ne_bytes(word)
                }
                Arg::Buffer { ty, init, .. } => {
                    let mut bytes = Vec::with_capacity(init.len() * ty.size());
                    for v in init {
                        ty.encode(*v, &mut bytes);
                    }
                    let buffer = driver.upload(&bytes)?;
                    let ptr = buffer.ptr();
                    buffers.push((index, buffer, bytes));
                    ptr
                }
            };
            slots.push(slot);
        }
        let params = slots
            .iter_mut()
            .map(|s| std::ptr::from_mut(s).cast::<c_void>())
            .collect();
        Ok(Prepared {
            launch,
            function,
            _slots: slots,
            params,
            buffers,
        })
    }

    /// Launch it on the default stream (asynchronously on a real device).
    pub(super) fn run(&mut self, driver: &Driver) -> Result<(), Failure> {
        let l = self.launch;
        driver.launch(
            self.function,
            l.grid,
            l.block,
            l.shared_mem_bytes,
            &mut self.params,
        )
    }

    /// Put every buffer back to its initial contents, so that one more
    /// launch can be verified like the first.
    pub(super) fn reset(&self, driver: &Driver) -> Result<(), Failure> {
        for (_, buffer, init) in &self.buffers {
            driver.write(buffer, init)?;
        }
        Ok(())
    }

    /// Compare every buffer with an `expect` against it (after the device
    /// finished the launch); returns how many values were compared.
    pub(super) fn verify(&self, driver: &Driver) -> Result<u64, Failure> {
        let name = &self.launch.function;
        let mut compared = 0;
        for (index, buffer, _) in &self.buffers {
            let Some(Arg::Buffer {
                ty,
                expect: Some(expect),
                tolerance,
                ..
            }) = self.launch.args.get(*index)
            else {
                continue;
            };
            let bytes = driver.download(buffer)?;
            let got: Vec<f64> = bytes
                .chunks_exact(ty.size())
                .map(|c| ty.decode(c))
                .collect();
            let bad: Vec<usize> = (0..expect.len())
                .filter(|&i| !got.get(i).is_some_and(|g| tolerance.accepts(*g, expect[i])))
                .collect();
            if let Some(&first) = bad.first() {
                let value = got.get(first).copied().unwrap_or(f64::NAN);
                return Err(Failure::Mismatch {
                    label: Some(name.clone()),
                    message: format!(
                        "argument {index} has {} of {} values outside the tolerance; first at [{first}]: got {value}, expected {}",
                        bad.len(),
                        expect.len(),
                        expect[first]
                    ),
                });
            }
            compared += expect.len() as u64;
        }
        Ok(compared)
    }
}

/// A launch asking for more dynamic shared memory than the kernel's
/// current limit (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: 48 KiB
/// less its static shared memory until raised) must raise that limit first,
/// up to the device's opt-in maximum (227 KiB on Hopper) less the static
/// part; a kernel with 16 KiB of static shared memory needs it from 32 KiB
/// of dynamic on. Beyond the maximum, the launch cannot run on this device
/// at all, which is said with both numbers.
fn allow_shared_memory(
    driver: &Driver,
    function: driver::Function,
    launch: &Launch,
) -> Result<(), Failure> {
    let asked = i64::from(launch.shared_mem_bytes);
    if asked == 0
        || asked <= function.attribute(driver::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?
    {
        return Ok(());
    }
    let optin = driver.attribute(driver::ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let fixed = function.attribute(driver::FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
    let room = optin - fixed;
    if asked > room {
        return Err(Failure::InvalidInput {
            message: format!(
                "launch of {} asks for {asked} bytes of dynamic shared memory; this device allows at most {optin} bytes per block (opt-in maximum){}",
                launch.function,
                if fixed > 0 {
                    format!(", of which the kernel's static shared memory takes {fixed}")
                } else {
                    String::new()
                }
            ),
        });
    }
    function.set_attribute(driver::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, asked)
}
