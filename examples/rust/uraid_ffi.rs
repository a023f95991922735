// SPDX-License-Identifier: MIT
// Example (f): uraid from Rust through the C API (uraid/uraid.h), with no
// crate and no bindgen: the handful of declarations a program needs,
// written by hand. Creates a 4-member array in memory, writes, fails a
// member, reads degraded, rebuilds onto a spare and verifies.
//
//   rustc -O examples/rust/uraid_ffi.rs -L BUILD/libraid -l uraid \
//     -C link-arg=-Wl,-rpath,BUILD/libraid
//
// Exits non-zero when a check fails (ctest runs it when rustc is found).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

#[repr(C)]
struct CreateOptions {
    // uraid_create_options, first version; struct_size lets the library
    // accept it from older or newer callers.
    struct_size: usize,
    level: c_int,
    layout: *const c_char,
    chunk_bytes: u64,
    name: *const c_char,
    member_bytes: u64,
    data_offset_bytes: u64,
    assume_clean: c_int,
    force: c_int,
    direct: c_int,
    bitmap: c_int,
    bitmap_file: *const c_char,
    bitmap_chunk_bytes: u64,
    cache_bytes: u64,
    log: Option<extern "C" fn(*mut c_void, c_int, *const c_char)>,
    log_user: *mut c_void,
    log_level: c_int,
}

enum Array {}
enum Member {}

#[link(name = "uraid")]
extern "C" {
    fn uraid_version() -> *const c_char;
    fn uraid_member_new_memory(name: *const c_char, size: u64, out: *mut *mut Member,
                               err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_member_new_faulty(target: *mut Member, out: *mut *mut Member,
                               err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_member_set_failed(m: *mut Member, failed: c_int) -> c_int;
    fn uraid_member_free(m: *mut Member);
    fn uraid_create_from(members: *const *mut Member, n: usize, o: *const CreateOptions,
                         out: *mut *mut Array, err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_size(a: *const Array) -> u64;
    fn uraid_write(a: *mut Array, buf: *const c_void, len: usize, off: u64, flags: u32,
                   err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_read(a: *mut Array, buf: *mut c_void, len: usize, off: u64,
                  err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_add(a: *mut Array, m: *mut Member, err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_wait_job(a: *mut Array, err: *mut c_char, err_len: usize) -> c_int;
    fn uraid_close(a: *mut Array, err: *mut c_char, err_len: usize) -> c_int;
}

// A uraid call's result: Ok, or the errno and the library's message.
fn check(rc: c_int, err: &[c_char; 256], what: &str) -> Result<(), String> {
    if rc == 0 {
        return Ok(());
    }
    let msg = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy();
    Err(format!("{what}: errno {}: {msg}", -rc))
}

fn run() -> Result<(), String> {
    const RAW: u64 = (1 << 20) + 32 * 65536;
    let mut err = [0 as c_char; 256];
    let e = err.as_mut_ptr();
    println!("liburaid {}", unsafe { CStr::from_ptr(uraid_version()) }.to_string_lossy());
    let mut mem = Vec::new();
    let mut faulty = Vec::new();
    for i in 0..5 {
        let name = CString::new(format!("m{i}")).unwrap();
        let mut m = ptr::null_mut();
        check(unsafe { uraid_member_new_memory(name.as_ptr(), RAW, &mut m, e, 256) }, &err, "memory")?;
        mem.push(m);
    }
    for m in &mem[..4] {
        let mut f = ptr::null_mut();
        check(unsafe { uraid_member_new_faulty(*m, &mut f, e, 256) }, &err, "faulty")?;
        faulty.push(f);
    }
    let o = CreateOptions {
        struct_size: std::mem::size_of::<CreateOptions>(),
        level: 0, layout: ptr::null(), chunk_bytes: 65536, name: ptr::null(),
        member_bytes: 32 * 65536, data_offset_bytes: 1 << 20, assume_clean: 1,
        force: 0, direct: 0, bitmap: 0, bitmap_file: ptr::null(),
        bitmap_chunk_bytes: 0, cache_bytes: 0, log: None,
        log_user: ptr::null_mut(), log_level: 0,
    };
    let mut a = ptr::null_mut();
    check(unsafe { uraid_create_from(faulty.as_ptr(), 4, &o, &mut a, e, 256) }, &err, "create")?;
    let size = unsafe { uraid_size(a) } as usize;
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
    check(unsafe { uraid_write(a, data.as_ptr().cast(), size, 0, 0, e, 256) }, &err, "write")?;
    unsafe { uraid_member_set_failed(faulty[1], 1) };
    let mut back = vec![0u8; size];
    check(unsafe { uraid_read(a, back.as_mut_ptr().cast(), size, 0, e, 256) }, &err, "degraded read")?;
    if back != data {
        return Err("degraded read differs".into());
    }
    check(unsafe { uraid_add(a, mem[4], e, 256) }, &err, "add spare")?;
    check(unsafe { uraid_wait_job(a, e, 256) }, &err, "rebuild")?;
    back.fill(0);
    check(unsafe { uraid_read(a, back.as_mut_ptr().cast(), size, 0, e, 256) }, &err, "read")?;
    if back != data {
        return Err("read after rebuild differs".into());
    }
    check(unsafe { uraid_close(a, e, 256) }, &err, "close")?;
    for m in faulty.into_iter().chain(mem) {
        unsafe { uraid_member_free(m) };
    }
    println!("rust ffi: degraded read and rebuild verified ({size} bytes)");
    Ok(())
}

fn main() {
    if let Err(msg) = run() {
        eprintln!("FAIL: {msg}");
        std::process::exit(1);
    }
}
