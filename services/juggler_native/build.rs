//! With the Python bindings on, tell rustc which Python it builds for (`cfg(Py_3_13)`
//! and the like): reading and writing Python ints of any size uses a different C API
//! from 3.13 on.

fn main() {
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
}
