//! Pulls known models with the library alone (what `evident models pull`
//! does), for machines where the `evident` binary is not built yet.
//!
//! Run: `cargo run -p evident-llm --example models_pull -- NAME [WHEEL_DIR]`

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().expect("usage: models_pull NAME [WHEEL_DIR]");
    let from = args.next().map(std::path::PathBuf::from);
    let model = evident_llm::models::find_model(&name).unwrap_or_else(|| panic!("unknown model {name}"));
    match evident_llm::models::pull(&model, from.as_deref()) {
        Ok(dir) => println!("{name} installed in {}", dir.display()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
