//! The agent's actions: their names, parameters and descriptions (the
//! `tools_desc` of Figure 17), and parsing one action out of a model answer
//! written in Figure 17's format (`Action:` followed by one JSON object
//! `{"action": NAME, "params": {...}}`, optionally in a code fence).

use serde_json::{Map, Value};

use super::Strategy;

/// One action the environment can execute.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    ListFiles {
        path: String,
    },
    ReadFile {
        path: String,
    },
    WriteFile {
        path: String,
        content: String,
    },
    /// Runs R code in the sandbox (saved in the workspace first).
    ExecuteR {
        code: String,
    },
    /// Runs an R script of the workspace in the sandbox.
    ExecuteRScript {
        path: String,
    },
    ListTables,
    DescribeTable {
        table: String,
    },
    /// Evident's typed cohort builder: structured criteria in, the cohort
    /// audit file, attrition table and SQL out ([`super::cohort`]).
    BuildCohort {
        params: Map<String, Value>,
    },
    /// Runs read-only SQL; with `save_as`, writes the whole result as CSV.
    RunSql {
        sql: String,
        save_as: Option<String>,
    },
    /// A typed statistics tool on a CSV table of the workspace.
    Statistics {
        tool: StatsTool,
        params: Map<String, Value>,
    },
    SubmitAnswers {
        answers: Vec<(String, Value)>,
    },
    FinishTask,
}

/// The typed statistics tools (`--strategy typed`), each over Evident's
/// own estimators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsTool {
    Describe,
    LogisticRegression,
    PoissonRegression,
    LinearRegression,
    CoxRegression,
    KaplanMeierLogrank,
    RocAuc,
    FisherTest,
    PropensityMatching,
    Iptw,
}

impl StatsTool {
    pub const ALL: [StatsTool; 10] = [
        StatsTool::Describe,
        StatsTool::LogisticRegression,
        StatsTool::PoissonRegression,
        StatsTool::LinearRegression,
        StatsTool::CoxRegression,
        StatsTool::KaplanMeierLogrank,
        StatsTool::RocAuc,
        StatsTool::FisherTest,
        StatsTool::PropensityMatching,
        StatsTool::Iptw,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StatsTool::Describe => "describe",
            StatsTool::LogisticRegression => "logistic_regression",
            StatsTool::PoissonRegression => "poisson_regression",
            StatsTool::LinearRegression => "linear_regression",
            StatsTool::CoxRegression => "cox_regression",
            StatsTool::KaplanMeierLogrank => "kaplan_meier_logrank",
            StatsTool::RocAuc => "roc_auc",
            StatsTool::FisherTest => "fisher_test",
            StatsTool::PropensityMatching => "propensity_matching",
            StatsTool::Iptw => "iptw",
        }
    }
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::ListFiles { .. } => "list_files",
            Action::ReadFile { .. } => "read_file",
            Action::WriteFile { .. } => "write_file",
            Action::ExecuteR { .. } => "execute_r",
            Action::ExecuteRScript { .. } => "execute_r_script",
            Action::ListTables => "list_tables",
            Action::DescribeTable { .. } => "describe_table",
            Action::BuildCohort { .. } => "build_cohort",
            Action::RunSql { .. } => "run_sql",
            Action::Statistics { tool, .. } => tool.name(),
            Action::SubmitAnswers { .. } => "submit_answers",
            Action::FinishTask => "finish_task",
        }
    }
}

struct ActionDoc {
    name: &'static str,
    description: &'static str,
    parameters: &'static [&'static str],
    returns: &'static str,
    example: &'static str,
    /// JSON Schema of `params` (the typed strategy decodes under it).
    params_schema: &'static str,
}

const COMMON: &[ActionDoc] = &[
    ActionDoc {
        name: "list_files",
        description: "Lists files and directories in a specified path.",
        parameters: &["path (optional): str, a relative path to list contents from. Defaults to agent workspace."],
        returns: "A list of files and directories in the specified path.",
        example: r#"{"action": "list_files", "params": {"path": "."}}"#,
        params_schema: r#"{"type": "object", "properties": {"path": {"type": "string", "maxLength": 200}}, "required": [], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "read_file",
        description: "Reads a text file of the workspace.",
        parameters: &["path: str, a path relative to the workspace."],
        returns: "The file's content (cut at the observation limit).",
        example: r#"{"action": "read_file", "params": {"path": "db_connect.R"}}"#,
        params_schema: r#"{"type": "object", "properties": {"path": {"type": "string", "maxLength": 200}}, "required": ["path"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "write_file",
        description: "Writes (or replaces) a text file in the workspace, e.g. an R script.",
        parameters: &["path: str, a path relative to the workspace.", "content: str, the whole file content."],
        returns: "Confirmation.",
        example: r#"{"action": "write_file", "params": {"path": "cohort.R", "content": "source(\"db_connect.R\")\n..."}}"#,
        params_schema: r#"{"type": "object", "properties": {"path": {"type": "string", "maxLength": 200}, "content": {"type": "string", "maxLength": 3000}}, "required": ["path", "content"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "execute_r",
        description: "Runs R code in the workspace (Rscript). Start with source(\"db_connect.R\") to get `con`, a DBI connection to the database.",
        parameters: &["code: str, the R code to run."],
        returns: "The standard output and error of the run.",
        example: r#"{"action": "execute_r", "params": {"code": "source(\"db_connect.R\")\nprint(dbGetQuery(con, \"SELECT count(*) FROM mimiciv_icu.icustays\"))"}}"#,
        params_schema: r#"{"type": "object", "properties": {"code": {"type": "string", "maxLength": 3000}}, "required": ["code"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "execute_r_script",
        description: "Runs an R script of the workspace (Rscript).",
        parameters: &["path: str, the script's path relative to the workspace."],
        returns: "The standard output and error of the run.",
        example: r#"{"action": "execute_r_script", "params": {"path": "cohort.R"}}"#,
        params_schema: r#"{"type": "object", "properties": {"path": {"type": "string", "maxLength": 200}}, "required": ["path"], "additionalProperties": false}"#,
    },
];

const TYPED: &[ActionDoc] = &[
    ActionDoc {
        name: "build_cohort",
        description: "Builds the cohort and writes cohort_audit.csv (the cohort audit file), attrition.csv and cohort.sql. Always: the first ICU stay of each patient, age at ICU admission at least min_age, and the columns subject_id, hadm_id, stay_id, age, female, hospital_expire_flag, days_to_death. Only when the protocol asks for them: labs (the first-day maximum of a labevents itemid the protocol names; stays without one are excluded), drug (a 0/1 column: a prescription whose name contains one of the listed drug names), death_within_days (columns death_Nd and followup_Nd), groups (a 0/1 column cut from age or a lab column: 1 where it is at_least or above a value).",
        parameters: &["min_age (optional): int, default 18.", "first_icu_stay_only (optional): bool, default true.", "labs (optional): list of {itemid: int, name: str}.", "drug (optional): {name: str, contains: list of drug names}.", "death_within_days (optional): int.", "groups (optional): list of {name: str, column: str, at_least or above: number}."],
        returns: "The cohort size, the attrition table and the columns of cohort_audit.csv.",
        example: r#"{"action": "build_cohort", "params": {"min_age": 18, "labs": [{"itemid": 50813, "name": "lactate"}], "death_within_days": 28}}"#,
        params_schema: super::cohort::PARAMS_SCHEMA,
    },
    ActionDoc {
        name: "list_tables",
        description: "Lists the database's tables (schema.table) with their row counts.",
        parameters: &[],
        returns: "The tables.",
        example: r#"{"action": "list_tables", "params": {}}"#,
        params_schema: r#"{"type": "object", "properties": {}, "required": [], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "describe_table",
        description: "Lists a table's columns and their types.",
        parameters: &["table: str, schema.table, e.g. mimiciv_hosp.patients."],
        returns: "The columns.",
        example: r#"{"action": "describe_table", "params": {"table": "mimiciv_icu.icustays"}}"#,
        params_schema: r#"{"type": "object", "properties": {"table": {"type": "string", "maxLength": 100}}, "required": ["table"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "run_sql",
        description: "Runs one read-only SQL query. With save_as, the whole result is written to that CSV file in the workspace (use this to build the cohort and the analysis table).",
        parameters: &["sql: str, one SELECT statement.", "save_as (optional): str, a CSV file name, e.g. cohort.csv."],
        returns: "The first rows of the result, and the file written.",
        example: r#"{"action": "run_sql", "params": {"sql": "SELECT subject_id, anchor_age FROM mimiciv_hosp.patients", "save_as": "patients.csv"}}"#,
        params_schema: r#"{"type": "object", "properties": {"sql": {"type": "string", "maxLength": 2000}, "save_as": {"type": "string", "maxLength": 100}}, "required": ["sql"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "describe",
        description: "Counts, means, medians and quartiles of columns of a CSV file of the workspace.",
        parameters: &["file: str, the CSV file.", "columns: list of str."],
        returns: "One summary per column.",
        example: r#"{"action": "describe", "params": {"file": "cohort.csv", "columns": ["age"]}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "columns": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}}, "required": ["file", "columns"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "logistic_regression",
        description: "Logistic regression of a 0/1 outcome on predictors (numeric columns) of a CSV file; odds ratios with Wald 95% CIs and p-values.",
        parameters: &["file: str.", "outcome: str, a 0/1 column.", "predictors: list of str."],
        returns: "The coefficient table.",
        example: r#"{"action": "logistic_regression", "params": {"file": "cohort.csv", "outcome": "died", "predictors": ["lactate", "age"]}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "outcome": {"type": "string", "maxLength": 64}, "predictors": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}}, "required": ["file", "outcome", "predictors"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "poisson_regression",
        description: "Poisson regression (log link) of a count outcome on predictors of a CSV file, with an optional offset column (the log of each row's exposure, e.g. log of days at risk); rate ratios with Wald 95% CIs and p-values.",
        parameters: &["file: str.", "outcome: str, a count column.", "predictors: list of str.", "offset (optional): str, a column holding log(exposure)."],
        returns: "The coefficient table.",
        example: r#"{"action": "poisson_regression", "params": {"file": "cohort.csv", "outcome": "n_readmissions", "predictors": ["age"], "offset": "log_days"}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "outcome": {"type": "string", "maxLength": 64}, "predictors": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}, "offset": {"type": "string", "maxLength": 64}}, "required": ["file", "outcome", "predictors"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "linear_regression",
        description: "Linear regression (least squares) of a numeric outcome on predictors of a CSV file; coefficients (differences) with t-based 95% CIs and p-values, and R-squared.",
        parameters: &["file: str.", "outcome: str, a numeric column.", "predictors: list of str."],
        returns: "The coefficient table.",
        example: r#"{"action": "linear_regression", "params": {"file": "cohort.csv", "outcome": "los_days", "predictors": ["age", "female"]}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "outcome": {"type": "string", "maxLength": 64}, "predictors": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}}, "required": ["file", "outcome", "predictors"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "cox_regression",
        description: "Cox proportional hazards model (Efron ties) of (time, event) on predictors of a CSV file; hazard ratios with Wald 95% CIs and p-values.",
        parameters: &["file: str.", "time: str.", "event: str, a 0/1 column.", "predictors: list of str."],
        returns: "The coefficient table.",
        example: r#"{"action": "cox_regression", "params": {"file": "cohort.csv", "time": "days", "event": "died", "predictors": ["high_rdw", "age"]}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "time": {"type": "string", "maxLength": 64}, "event": {"type": "string", "maxLength": 64}, "predictors": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}}, "required": ["file", "time", "event", "predictors"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "kaplan_meier_logrank",
        description: "Kaplan-Meier survival by group and the log-rank test between groups.",
        parameters: &["file: str.", "time: str.", "event: str.", "group: str, a numeric group column."],
        returns: "Events and survival at the last time per group, and the log-rank test.",
        example: r#"{"action": "kaplan_meier_logrank", "params": {"file": "cohort.csv", "time": "days", "event": "died", "group": "high_rdw"}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "time": {"type": "string", "maxLength": 64}, "event": {"type": "string", "maxLength": 64}, "group": {"type": "string", "maxLength": 64}}, "required": ["file", "time", "event", "group"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "roc_auc",
        description: "Area under the ROC curve of a predictor for a 0/1 outcome, with DeLong 95% CI.",
        parameters: &["file: str.", "outcome: str.", "predictor: str."],
        returns: "The AUC.",
        example: r#"{"action": "roc_auc", "params": {"file": "cohort.csv", "outcome": "died", "predictor": "anion_gap"}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "outcome": {"type": "string", "maxLength": 64}, "predictor": {"type": "string", "maxLength": 64}}, "required": ["file", "outcome", "predictor"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "fisher_test",
        description: "Fisher's exact test (two-sided) between two 0/1 columns.",
        parameters: &["file: str.", "row: str, a 0/1 column.", "column: str, a 0/1 column."],
        returns: "The p-value and odds ratio.",
        example: r#"{"action": "fisher_test", "params": {"file": "cohort.csv", "row": "older", "column": "died"}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "row": {"type": "string", "maxLength": 64}, "column": {"type": "string", "maxLength": 64}}, "required": ["file", "row", "column"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "propensity_matching",
        description: "Propensity score matching: a logistic propensity model of the 0/1 treatment on the covariates, 1:1 nearest-neighbour matching without replacement on the logit of the score with a caliper (default 0.2 SD), covariate balance (standardised mean differences) before and after, and the treatment effect on the outcome in the matched sample (logistic: odds ratio; linear: mean difference) with a robust (sandwich) 95% CI.",
        parameters: &["file: str.", "treatment: str, a 0/1 column.", "covariates: list of str.", "outcome: str.", "outcome_model (optional): logistic (default, 0/1 outcome) or linear.", "caliper (optional): number, in SDs of the logit (default 0.2)."],
        returns: "Matched counts, balance and the effect.",
        example: r#"{"action": "propensity_matching", "params": {"file": "cohort.csv", "treatment": "statin", "covariates": ["age", "female"], "outcome": "died"}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "treatment": {"type": "string", "maxLength": 64}, "covariates": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}, "outcome": {"type": "string", "maxLength": 64}, "outcome_model": {"type": "string", "enum": ["logistic", "linear"]}, "caliper": {"type": "number"}}, "required": ["file", "treatment", "covariates", "outcome"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "iptw",
        description: "Inverse probability of treatment weighting: a logistic propensity model, weights for the ATE (default) or ATT, balance before and after weighting, and the weighted treatment effect on the outcome (logistic: odds ratio; linear: mean difference) with a robust (sandwich) 95% CI.",
        parameters: &["file: str.", "treatment: str, a 0/1 column.", "covariates: list of str.", "outcome: str.", "estimand (optional): ate (default) or att.", "outcome_model (optional): logistic (default) or linear."],
        returns: "The weights' range, balance and the effect.",
        example: r#"{"action": "iptw", "params": {"file": "cohort.csv", "treatment": "statin", "covariates": ["age", "female"], "outcome": "died", "estimand": "ate"}}"#,
        params_schema: r#"{"type": "object", "properties": {"file": {"type": "string", "maxLength": 200}, "treatment": {"type": "string", "maxLength": 64}, "covariates": {"type": "array", "items": {"type": "string", "maxLength": 64}, "minItems": 1, "maxItems": 12}, "outcome": {"type": "string", "maxLength": 64}, "estimand": {"type": "string", "enum": ["ate", "att"]}, "outcome_model": {"type": "string", "enum": ["logistic", "linear"]}}, "required": ["file", "treatment", "covariates", "outcome"], "additionalProperties": false}"#,
    },
];

const FINAL: &[ActionDoc] = &[
    ActionDoc {
        name: "submit_answers",
        description: "Submits answers: option letters for choice questions, numbers for fields. Allowed only after the cohort audit file cohort_audit.csv exists in the workspace. Each question is answered once; answering a choice question correctly reveals its follow-up fields.",
        parameters: &["answers: object, question id or field name -> answer."],
        returns: "What was accepted, new follow-up fields, and what remains.",
        example: r#"{"action": "submit_answers", "params": {"answers": {"q_main": "A", "n_patients": 120}}}"#,
        params_schema: r#"{"type": "object", "properties": {"answers": {"type": "object", "additionalProperties": {"type": ["string", "number"]}}}, "required": ["answers"], "additionalProperties": false}"#,
    },
    ActionDoc {
        name: "finish_task",
        description: "Ends the task.",
        parameters: &[],
        returns: "Nothing.",
        example: r#"{"action": "finish_task", "params": {}}"#,
        params_schema: r#"{"type": "object", "properties": {}, "required": [], "additionalProperties": false}"#,
    },
];

/// `submit_answers` as the grounded strategy offers it: results by key,
/// never typed numbers.
const GROUNDED_SUBMIT: ActionDoc = ActionDoc {
    name: "submit_answers",
    description: "Submits answers computed by the tools: a field as {\"from_result\": KEY}, the key of a result a tool listed (Evident fills in the number; typed numbers are not accepted), a choice question's option letter once an effect or test has been computed. Offered only when something can be submitted; each question is answered once; answering a choice question correctly reveals its follow-up fields.",
    parameters: &["answers: object, question id or field name -> option letter or {\"from_result\": KEY}."],
    returns: "What was accepted, new follow-up fields, and what remains.",
    example: r#"{"action": "submit_answers", "params": {"answers": {"q_main": "A", "n_patients": {"from_result": "stays"}}}}"#,
    params_schema: r#"{"type": "object", "properties": {"answers": {"type": "object", "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"from_result": {"type": "string"}}, "required": ["from_result"], "additionalProperties": false}]}}}, "required": ["answers"], "additionalProperties": false}"#,
};

fn docs(strategy: Strategy) -> Vec<&'static ActionDoc> {
    // The typed strategies list their own actions first (build_cohort leads).
    let mut all: Vec<&ActionDoc> = Vec::new();
    if strategy.is_typed() {
        all.extend(TYPED);
    }
    all.extend(COMMON);
    match strategy {
        Strategy::TypedGrounded | Strategy::TypedRead => {
            all.push(&GROUNDED_SUBMIT);
            all.extend(FINAL.iter().filter(|d| d.name != "submit_answers"));
        }
        _ => all.extend(FINAL),
    }
    all
}

/// The action names a strategy offers.
pub fn action_names(strategy: Strategy) -> Vec<&'static str> {
    docs(strategy).iter().map(|d| d.name).collect()
}

/// The toolset description that replaces `{tools_desc}` in Figure 17. The
/// typed strategy's is compact (one line of parameters per action, no
/// example answer: the schema its answers are decoded under fixes their
/// shape), so that it fits a 4,096-token model with room to work.
pub fn tools_desc(strategy: Strategy) -> String {
    let mut out = String::new();
    for d in docs(strategy) {
        if strategy.is_typed() {
            let params = if d.parameters.is_empty() { "none".to_string() } else { d.parameters.join(" ") };
            out.push_str(&format!("- {}: {} Parameters: {params}\n", d.name, d.description));
            continue;
        }
        out.push_str(&format!("{}: {}\n* parameters:\n", d.name, d.description));
        if d.parameters.is_empty() {
            out.push_str("    (none)\n");
        }
        for p in d.parameters {
            out.push_str(&format!("    - {p}\n"));
        }
        out.push_str(&format!("* return: {}\n", d.returns));
        out.push_str(&format!("* valid response format to execute this action:\n```json\n{}\n```\n\n", d.example));
    }
    out
}

/// Finds the action in a model answer and checks it against the strategy's
/// actions. The error says what to fix, for the model to read.
pub fn parse_action(text: &str, strategy: Strategy) -> Result<Action, String> {
    let after = match text.rfind("Action:") {
        Some(i) => &text[i + "Action:".len()..],
        None => return Err("no `Action:` section; end your response with Action: and one JSON action".into()),
    };
    let value = first_json_object(after)
        .ok_or("the Action section holds no JSON object; write {\"action\": NAME, \"params\": {...}}".to_string())?;
    action_from_value(&value, strategy)
}

/// The text inside one code fence around the whole answer, or the
/// trimmed answer when it has none.
fn strip_code_fence(text: &str) -> &str {
    let body = text.trim();
    body.strip_prefix("```json")
        .or_else(|| body.strip_prefix("```"))
        .and_then(|b| b.strip_suffix("```"))
        .map(str::trim)
        .unwrap_or(body)
}

/// The typed strategy's answer: one JSON object `{"thought": ..., "action":
/// {"action": NAME, "params": {...}}}`, decoded under [`response_schema`]
/// (a code fence around the whole answer is tolerated, nothing else).
pub fn parse_typed_response(text: &str, strategy: Strategy) -> Result<Action, String> {
    let body = strip_code_fence(text);
    let value: Value = serde_json::from_str(body).map_err(|e| {
        format!("the answer is not one JSON object ({e}); answer {{\"thought\": \"...\", \"action\": {{\"action\": NAME, \"params\": {{...}}}}}}")
    })?;
    let action = value.get("action").ok_or("the answer has no \"action\" object")?;
    if !action.is_object() {
        return Err("\"action\" must be an object {\"action\": NAME, \"params\": {...}}".into());
    }
    action_from_value(action, strategy)
}

/// Checks a typed answer against the schema it was asked under (Evident's:
/// a model decoded without the grammar, or a scripted one, is held to the
/// same schema). The error names what is offered: the actions, a tool's
/// files and columns, the open question ids and their values.
pub fn check_typed_answer(text: &str, schema: &Value) -> Result<(), String> {
    let body = strip_code_fence(text);
    let value: Value = serde_json::from_str(body).map_err(|e| format!("the answer is not one JSON object ({e})"))?;
    let action = value.get("action").cloned().unwrap_or_default();
    let name = action.get("action").and_then(Value::as_str).unwrap_or_default();
    let branches = schema["properties"]["action"]["anyOf"].as_array().cloned().unwrap_or_default();
    let offered: Vec<&str> = branches.iter().filter_map(|b| b["properties"]["action"]["const"].as_str()).collect();
    let Some(branch) = branches.iter().find(|b| b["properties"]["action"]["const"] == name) else {
        return Err(format!("{name} is not offered now; use one of {}", offered.join(", ")));
    };
    let params = action.get("params").cloned().unwrap_or(Value::Object(Map::new()));
    let params_schema = &branch["properties"]["params"];
    let errors = |schema: &Value, instance: &Value| -> Vec<String> {
        match evident_llm::SchemaValidator::new(schema) {
            Ok(v) => v.check(&instance.to_string()).err().unwrap_or_default(),
            Err(e) => vec![e.to_string()],
        }
    };
    if name == "submit_answers" {
        // The first branch names every open answer.
        let open = &params_schema["properties"]["answers"]["anyOf"][0]["properties"];
        let answers = params.get("answers").and_then(Value::as_object).cloned().unwrap_or_default();
        let ids: Vec<&String> = open.as_object().map(|o| o.keys().collect()).unwrap_or_default();
        let mut problems = Vec::new();
        if answers.is_empty() {
            problems.push("give at least one answer".to_string());
        }
        for (id, v) in &answers {
            match open.get(id) {
                None => problems.push(format!("{id:?} is not an open question")),
                Some(s) => problems.extend(errors(s, v).into_iter().map(|e| format!("{id}: {e}"))),
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = ids.iter().map(|s| s.as_str()).collect();
        return Err(format!("submit_answers: {}; the open questions are {}", problems.join("; "), ids.join(", ")));
    }
    // A statistics tool on several tables: the branch of the file named.
    let tables: Vec<&Value> = match params_schema["anyOf"].as_array() {
        Some(tables) => tables.iter().collect(),
        None if params_schema["properties"]["file"].get("const").is_some() => vec![params_schema],
        None => Vec::new(),
    };
    let params_schema = if tables.is_empty() {
        params_schema
    } else {
        let file = params.get("file").cloned().unwrap_or_default();
        match tables.iter().find(|t| t["properties"]["file"]["const"] == file) {
            Some(t) => t,
            None => {
                let files: Vec<&str> =
                    tables.iter().filter_map(|t| t["properties"]["file"]["const"].as_str()).collect();
                return Err(format!("{name}: file {file} is not offered; use one of {}", files.join(", ")));
            }
        }
    };
    let problems = errors(params_schema, &params);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}: {}", problems.join("; ")))
    }
}

/// The JSON Schema the typed strategy's answers are decoded under: a short
/// thought and one action, each action with its own parameter schema.
pub fn response_schema(strategy: Strategy) -> Value {
    response_schema_excluding(strategy, &[])
}

/// [`response_schema`] without the named actions: Evident's loop guard asks
/// again under it when the typed strategy repeats its previous action.
pub fn response_schema_excluding(strategy: Strategy, excluded: &[&str]) -> Value {
    response_schema_with(strategy, excluded, None, None)
}

/// The typed strategy's schema for one task: [`response_schema_excluding`]
/// with `build_cohort`'s parameters narrowed to the protocol
/// ([`super::cohort::params_schema_for`]).
pub fn task_response_schema(task: &crate::task::Task, excluded: &[&str]) -> Value {
    let text = format!("{}\n{}", task.protocol.background, task.protocol.methods);
    response_schema_with(Strategy::Typed, excluded, Some(super::cohort::params_schema_for(&text)), None)
}

/// A CSV table of the workspace as the typed statistics tools see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsvColumns {
    /// The file name, relative to the workspace.
    pub file: String,
    /// Columns whose every non-empty cell is a finite number, with at least
    /// two different values (the identifiers subject_id, hadm_id, stay_id
    /// left out).
    pub numeric: Vec<String>,
    /// Numeric columns holding only 0 and 1, both present.
    pub binary: Vec<String>,
}

/// What Evident's typed schema follows besides the protocol: the run's
/// state after the last step ([`super::env::StudyEnv::schema_state`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchemaState {
    /// Whether the cohort audit file exists (answers are refused before).
    pub audit_present: bool,
    /// The visible, unanswered question ids and field names with the
    /// schema of their answer ([`crate::AnswerSheet::open_answer_schemas`]).
    pub open_answers: Vec<(String, Value)>,
    /// The workspace's CSV tables a statistics tool can read.
    pub tables: Vec<CsvColumns>,
    /// The database's tables (schema.table) `describe_table` can name.
    pub db_tables: Vec<String>,
    /// The files at the top of the workspace `read_file` can name (the R
    /// scripts among them for `execute_r_script`).
    pub workspace_files: Vec<String>,
    /// Only `finish_task` is offered: every open question is one that no
    /// tool's result can fill (the grounded strategy's dead end, said in
    /// the `[State]` line), so another action could only loop.
    pub finish_only: bool,
    /// The grounded strategy (`--strategy typed-grounded`): its
    /// `build_cohort` schema ([`super::cohort::grounded_params_schema_for`]).
    pub grounded: bool,
    /// When not empty, only these actions are offered: the tools the
    /// grounded strategy's open questions need and `build_cohort`, after
    /// [`super::env::IDLE_BEFORE_COMPUTE`] actions in a row that ran none of
    /// them while nothing could be submitted (said in the `[State]` line).
    pub compute_only: Vec<String>,
    /// `finish_task` is not offered: the grounded strategy has no cohort
    /// yet, or an open question some tool's result could still fill (run
    /// 5's age task finished at step 4 with five baseline fields open).
    pub no_finish: bool,
    /// The columns a grounded `build_cohort` group may cut (age and the
    /// protocol's laboratory columns).
    pub group_columns: Vec<String>,
    /// The names such a group may take, from the fields it is for (empty:
    /// any name).
    pub group_names: Vec<String>,
    /// The names a grounded drug column may take (empty: any name).
    pub drug_names: Vec<String>,
    /// Only `submit_answers` is offered: the grounded strategy went past
    /// answers it could submit [`super::env::PASSES_BEFORE_SUBMIT`] times
    /// in a row (said in the `[State]` line).
    pub submit_only: bool,
    /// The grounded strategy's column roles: a statistics tool's outcome,
    /// time and exposure parameters take only columns of that role.
    pub roles: Option<ColumnRoles>,
}

/// The typed strategy's schema for one task in one state (Evident's): the
/// protocol's `build_cohort` ([`task_response_schema`]), and after it only
/// valid things to say. `submit_answers` names exactly the open question
/// ids and field names, each with its answer's schema (option letters, a
/// whole count, a number in its range), and is left out before the audit
/// file exists or when nothing is open. Each statistics tool's `file` is one
/// of the workspace's CSV tables, and its column parameters are that
/// table's columns: numeric ones, and 0/1 ones where the tool needs a 0/1
/// column (outcome of a logistic model or ROC curve, event, treatment,
/// Fisher's rows and columns); a tool with no table to act on is left out.
/// `describe_table` names one of the database's tables, `read_file` one of
/// the workspace's files and `execute_r_script` one of its R scripts (left
/// out when there is none). For the grounded strategy the state's open
/// answers are already narrowed ([`super::env::StudyEnv::schema_state`]: a
/// field only as `{"from_result": KEY}`, a choice only after an effect or
/// test, nothing no result can fill), so `submit_answers` is left out while
/// none is offerable, and `finish_only` leaves nothing but `finish_task`.
pub fn state_response_schema(task: &crate::task::Task, excluded: &[&str], state: &SchemaState) -> Value {
    let text = format!("{}\n{}", task.protocol.background, task.protocol.methods);
    let cohort = if state.grounded {
        super::cohort::grounded_params_schema_for(&text, &state.group_columns, &state.group_names, &state.drug_names)
    } else {
        super::cohort::params_schema_for(&text)
    };
    response_schema_with(Strategy::Typed, excluded, Some(cohort), Some(state))
}

/// Whether the typed tool's column parameter `key` takes a 0/1 column.
fn binary_param(tool: &str, key: &str) -> bool {
    matches!(
        (tool, key),
        ("logistic_regression", "outcome")
            | ("roc_auc", "outcome")
            | ("cox_regression" | "kaplan_meier_logrank", "event")
            | ("fisher_test", "row" | "column")
            | ("propensity_matching" | "iptw", "treatment")
    )
}

/// What a typed tool's column parameter stands for in a study.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ParamRole {
    /// The outcome (a regression's, a ROC curve's, a survival event,
    /// Fisher's column).
    Outcome,
    /// A survival model's follow-up time.
    Time,
    /// An exposure or covariate (predictors, treatment, Fisher's row).
    Exposure,
    /// Any column (`describe`).
    Any,
}

fn param_role(tool: &str, key: &str) -> ParamRole {
    match (tool, key) {
        (_, "outcome") | ("cox_regression" | "kaplan_meier_logrank", "event") | ("fisher_test", "column") => {
            ParamRole::Outcome
        }
        ("cox_regression" | "kaplan_meier_logrank", "time") => ParamRole::Time,
        (_, "predictors" | "covariates" | "treatment" | "predictor" | "group" | "offset") | ("fisher_test", "row") => {
            ParamRole::Exposure
        }
        _ => ParamRole::Any,
    }
}

/// The grounded strategy's roles of the cohort's columns, from the
/// protocol's outcome ([`super::cohort::protocol_death_days`]): a tool's
/// outcome is the protocol's outcome column, a survival time its follow-up
/// column, and no column derived from the outcome (in-hospital death, days
/// to death, death within N days, follow-up) is an exposure or a
/// covariate. Run 5's anion-gap regression put `days_to_death` among its
/// predictors, which separates the outcome completely.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColumnRoles {
    /// The protocol's outcome: `death_{N}d` for death within N days,
    /// otherwise `hospital_expire_flag`.
    pub outcomes: Vec<String>,
    /// The follow-up of a death within N days: `followup_{N}d`.
    pub times: Vec<String>,
    /// The protocol's regressions and covariate lists: where every term of
    /// one names a column of the table, that set is the only one a
    /// regression's `predictors` (a propensity model's `covariates`) take.
    pub models: super::adjustment::ProtocolModels,
    /// The words of the protocol's Exposure and Groups text: a compared
    /// group (Kaplan-Meier's, Fisher's row, a treatment) is a column named
    /// with them where one is. A run at cc692e6 compared survival by sex,
    /// not by high RDW, and its log-rank p counted for the RDW question.
    pub exposure_words: Vec<String>,
    /// The protocol's matching caliper in SDs ("a caliper of 0.2 standard
    /// deviations"): the only one `propensity_matching` takes; where the
    /// protocol gives none, the parameter is left out and the tool's
    /// default (0.2) applies. Run 9's statin task matched with a caliper of
    /// 3.2 SD, 44 pairs where the protocol's 0.2 gives 31.
    pub caliper: Option<f64>,
}

/// The number within five words after "caliper" in a protocol's text.
pub fn protocol_caliper(protocol_text: &str) -> Option<f64> {
    let text = protocol_text.to_lowercase();
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words.iter().position(|w| w.starts_with("caliper"))?;
    words[at + 1..].iter().take(5).find_map(|w| w.trim_end_matches([',', '.', ';', ')']).parse::<f64>().ok())
}

impl ColumnRoles {
    /// The roles for a protocol's text (its background and methods).
    pub fn for_protocol(protocol_text: &str) -> ColumnRoles {
        let models = super::adjustment::ProtocolModels::read(protocol_text);
        let exposure_words = super::cohort::protocol_exposure_words(protocol_text);
        let caliper = protocol_caliper(protocol_text);
        match super::cohort::protocol_death_days(protocol_text) {
            Some(n) => ColumnRoles {
                outcomes: vec![format!("death_{n}d")],
                times: vec![format!("followup_{n}d")],
                models,
                exposure_words,
                caliper,
            },
            None => ColumnRoles {
                outcomes: vec!["hospital_expire_flag".into()],
                times: Vec::new(),
                models,
                exposure_words,
                caliper,
            },
        }
    }

    /// The protocol's sets for a tool's list parameter on a table whose
    /// columns the parameter may take (none where the protocol names none).
    fn protocol_sets(&self, tool: &str, key: &str, columns: &[String]) -> Vec<Vec<String>> {
        match (tool, key) {
            ("logistic_regression" | "poisson_regression" | "linear_regression" | "cox_regression", "predictors") => {
                self.models.predictor_sets(columns)
            }
            ("propensity_matching" | "iptw", "covariates") => self.models.covariate_sets(columns),
            _ => Vec::new(),
        }
    }

    /// Whether a column of a cohort the builder wrote is derived from the
    /// outcome (and so cannot be an exposure or a covariate).
    pub fn outcome_derived(column: &str) -> bool {
        let windowed = |prefix: &str| {
            column
                .strip_prefix(prefix)
                .and_then(|r| r.strip_suffix('d'))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        matches!(column, "hospital_expire_flag" | "days_to_death") || windowed("death_") || windowed("followup_")
    }

    /// The columns out of `columns` a parameter of this role may take.
    fn allow(&self, role: ParamRole, columns: &[String]) -> Vec<String> {
        let keep = |c: &&String| match role {
            ParamRole::Outcome => self.outcomes.contains(c),
            ParamRole::Time => self.times.contains(c),
            ParamRole::Exposure => !Self::outcome_derived(c),
            ParamRole::Any => true,
        };
        columns.iter().filter(keep).cloned().collect()
    }
}

/// A statistics tool's parameter schema on one table: `file` fixed to it,
/// each column parameter one of its columns (with `roles`, only those of
/// the parameter's role, and a list the protocol's own set where it names
/// one); `None` when a required column parameter has no column to take.
fn tool_params_on(doc: &ActionDoc, table: &CsvColumns, roles: Option<&ColumnRoles>) -> Option<Value> {
    let mut schema: Value = serde_json::from_str(doc.params_schema).expect("action parameter schemas are valid JSON");
    let required: Vec<String> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let props = schema["properties"].as_object_mut()?;
    let mut unusable = Vec::new();
    for (key, prop) in props.iter_mut() {
        if key == "file" {
            *prop = serde_json::json!({"const": table.file});
            continue;
        }
        if key == "caliper" {
            if let Some(r) = roles {
                match r.caliper {
                    Some(c) => *prop = serde_json::json!({"const": c}),
                    None => unusable.push(key.clone()),
                }
            }
            continue;
        }
        // Grounded, a Kaplan-Meier group is a 0/1 column (the 0.5B model
        // would otherwise be offered age, one curve per year of age).
        let grouped = roles.is_some() && doc.name == "kaplan_meier_logrank" && key == "group";
        let columns = if grouped || binary_param(doc.name, key) { &table.binary } else { &table.numeric };
        let columns = &match roles {
            Some(r) => {
                let allowed = r.allow(param_role(doc.name, key), columns);
                let compared = matches!(
                    (doc.name, key.as_str()),
                    ("kaplan_meier_logrank", "group") | ("fisher_test", "row") | (_, "treatment")
                );
                let named: Vec<String> = allowed
                    .iter()
                    .filter(|c| c.split('_').all(|w| r.exposure_words.iter().any(|e| e == w)))
                    .cloned()
                    .collect();
                if compared && !named.is_empty() {
                    named
                } else {
                    allowed
                }
            }
            None => columns.clone(),
        };
        let is_column = |p: &Value| p.get("type") == Some(&Value::from("string")) && p.get("enum").is_none();
        if is_column(prop) {
            *prop = serde_json::json!({"enum": columns});
        } else if prop.get("type") == Some(&Value::from("array")) && is_column(&prop["items"]) {
            let sets = roles.map(|r| r.protocol_sets(doc.name, key, columns)).unwrap_or_default();
            if !sets.is_empty() {
                let consts: Vec<Value> = sets.into_iter().map(|set| serde_json::json!({"const": set})).collect();
                *prop = if consts.len() == 1 { consts[0].clone() } else { serde_json::json!({"anyOf": consts}) };
                continue;
            }
            let max = prop["maxItems"].as_u64().unwrap_or(12).min(columns.len() as u64);
            prop["items"] = serde_json::json!({"enum": columns});
            prop["maxItems"] = Value::from(max);
        } else {
            continue;
        }
        if columns.is_empty() {
            unusable.push(key.clone());
        }
    }
    if unusable.iter().any(|k| required.contains(k)) {
        return None;
    }
    for key in unusable {
        props.remove(&key);
    }
    Some(schema)
}

/// Parameters of one required name out of `names` (a table, a file).
fn names_param(key: &str, names: Vec<&String>) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {key: {"enum": names}},
        "required": [key],
        "additionalProperties": false
    })
}

/// `submit_answers`' parameters for the open answers: at least one of them,
/// nothing else (llguidance keeps the schema's order of properties, so the
/// branches are "the first answer given is this one").
fn submit_params(open: &[(String, Value)]) -> Value {
    let branches: Vec<Value> = (0..open.len())
        .map(|i| {
            let properties: Map<String, Value> = open[i..].iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            serde_json::json!({"type": "object", "properties": properties, "required": [open[i].0], "additionalProperties": false})
        })
        .collect();
    serde_json::json!({
        "type": "object",
        "properties": {"answers": {"anyOf": branches}},
        "required": ["answers"],
        "additionalProperties": false
    })
}

fn response_schema_with(
    strategy: Strategy,
    excluded: &[&str],
    cohort_params: Option<Value>,
    state: Option<&SchemaState>,
) -> Value {
    // The narrowing levers never leave nothing to answer with: where the
    // actions they keep are all excluded (a needed tool that failed twice
    // in a row), the state's other limits still hold without them.
    if let Some(s) = state.filter(|s| !s.compute_only.is_empty() || s.submit_only) {
        let kept = |d: &ActionDoc| {
            !excluded.contains(&d.name)
                && (s.compute_only.is_empty() || s.compute_only.iter().any(|c| c == d.name))
                && (!s.submit_only || d.name == "submit_answers")
        };
        if !docs(strategy).iter().copied().any(kept) {
            let wider = SchemaState { compute_only: Vec::new(), submit_only: false, ..s.clone() };
            return response_schema_with(strategy, excluded, cohort_params, Some(&wider));
        }
    }
    let actions: Vec<Value> = docs(strategy)
        .iter()
        .filter(|d| !excluded.contains(&d.name))
        .filter_map(|d| {
            let stats = StatsTool::ALL.iter().any(|t| t.name() == d.name);
            let params: Value = match (&cohort_params, d.name, state) {
                (_, name, Some(s)) if s.finish_only && name != "finish_task" => return None,
                (_, name, Some(s)) if s.submit_only && name != "submit_answers" => return None,
                (_, "finish_task", Some(s)) if s.no_finish => return None,
                (_, name, Some(s)) if !s.compute_only.is_empty() && !s.compute_only.iter().any(|c| c == name) => {
                    return None
                }
                (Some(p), "build_cohort", _) => p.clone(),
                (_, "submit_answers", Some(s)) if !s.audit_present || s.open_answers.is_empty() => return None,
                // Once the cohort exists the schema already names every table
                // (describe_table) and workspace file (read_file): listing
                // them again is not offered (the 0.5B model looped on both).
                (_, "list_tables" | "list_files", Some(s)) if s.audit_present => return None,
                (_, "submit_answers", Some(s)) => submit_params(&s.open_answers),
                (_, "describe_table", Some(s)) if !s.db_tables.is_empty() => {
                    names_param("table", s.db_tables.iter().collect())
                }
                (_, "read_file", Some(s)) if !s.workspace_files.is_empty() => {
                    names_param("path", s.workspace_files.iter().collect())
                }
                (_, "execute_r_script", Some(s)) => {
                    let scripts: Vec<&String> = s.workspace_files.iter().filter(|f| f.ends_with(".R")).collect();
                    if scripts.is_empty() {
                        return None;
                    }
                    names_param("path", scripts)
                }
                (_, _, Some(s)) if stats => {
                    let mut on_tables: Vec<Value> =
                        s.tables.iter().filter_map(|t| tool_params_on(d, t, s.roles.as_ref())).collect();
                    match on_tables.len() {
                        0 => return None,
                        1 => on_tables.remove(0),
                        _ => serde_json::json!({"anyOf": on_tables}),
                    }
                }
                _ => serde_json::from_str(d.params_schema).expect("action parameter schemas are valid JSON"),
            };
            Some(serde_json::json!({
                "type": "object",
                "properties": {"action": {"const": d.name}, "params": params},
                "required": ["action", "params"],
                "additionalProperties": false
            }))
        })
        .collect();
    serde_json::json!({
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": THOUGHT_MAX_CHARS},
            "action": {"anyOf": actions}
        },
        "required": ["thought", "action"],
        "additionalProperties": false
    })
}

/// The longest thought the typed strategy's schema allows.
pub const THOUGHT_MAX_CHARS: usize = 400;

fn action_from_value(value: &Value, strategy: Strategy) -> Result<Action, String> {
    let name = value.get("action").and_then(Value::as_str).ok_or("the action object has no \"action\" name")?;
    if !action_names(strategy).contains(&name) {
        return Err(format!("unknown action {name:?}; use one of {}", action_names(strategy).join(", ")));
    }
    let empty = Map::new();
    let params = match value.get("params") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err("\"params\" must be an object".into()),
    };
    let string = |key: &str| -> Result<String, String> {
        params
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(format!("{name} needs the string parameter {key:?}"))
    };
    let optional = |key: &str| params.get(key).and_then(Value::as_str).map(str::to_string);
    Ok(match name {
        "list_files" => Action::ListFiles { path: optional("path").unwrap_or_else(|| ".".into()) },
        "read_file" => Action::ReadFile { path: string("path")? },
        "write_file" => Action::WriteFile { path: string("path")?, content: string("content")? },
        "execute_r" => Action::ExecuteR { code: string("code")? },
        "execute_r_script" => Action::ExecuteRScript { path: string("path")? },
        "list_tables" => Action::ListTables,
        "describe_table" => Action::DescribeTable { table: string("table")? },
        "build_cohort" => Action::BuildCohort { params: params.clone() },
        "run_sql" => Action::RunSql { sql: string("sql")?, save_as: optional("save_as") },
        "submit_answers" => match params.get("answers") {
            Some(Value::Object(m)) if !m.is_empty() => {
                Action::SubmitAnswers { answers: m.iter().map(|(k, v)| (k.clone(), v.clone())).collect() }
            }
            _ => {
                return Err("submit_answers needs \"answers\": an object of question id or field name -> answer".into())
            }
        },
        "finish_task" => Action::FinishTask,
        other => match StatsTool::ALL.iter().find(|t| t.name() == other) {
            Some(tool) => Action::Statistics { tool: *tool, params: params.clone() },
            None => return Err(format!("unknown action {other:?}")),
        },
    })
}

/// The first complete JSON object in `text` (inside a code fence or not).
fn first_json_object(text: &str) -> Option<Value> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        if let Ok(v) = serde_json::from_str::<Value>(&text[open..=i]) {
                            if v.is_object() {
                                return Some(v);
                            }
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
        start = open + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "Reflection: none yet.\nResearch Plan and Status: 1. look\nFact Check: none\nThought: list\nAction: ```json\n{\"action\": \"execute_r\", \"params\": {\"code\": \"cat(\\\"{}\\\")\"}}\n```";

    #[test]
    fn figure_17_answers_parse() {
        assert_eq!(parse_action(ANSWER, Strategy::R).unwrap(), Action::ExecuteR { code: "cat(\"{}\")".into() });
        let submit = "Thought: t\nAction: {\"action\": \"submit_answers\", \"params\": {\"answers\": {\"q1\": \"B\", \"n\": 74}}}";
        assert_eq!(
            parse_action(submit, Strategy::R).unwrap(),
            Action::SubmitAnswers { answers: vec![("q1".into(), "B".into()), ("n".into(), 74.into())] }
        );
        assert_eq!(parse_action("Action: {\"action\": \"finish_task\"}", Strategy::R).unwrap(), Action::FinishTask);
    }

    #[test]
    fn invalid_answers_say_what_to_fix() {
        let e = |t: &str, s| parse_action(t, s).unwrap_err();
        assert!(e("I will run R now.", Strategy::R).contains("no `Action:` section"));
        assert!(e("Action: run it", Strategy::R).contains("holds no JSON object"));
        assert!(e("Action: {\"action\": \"run_sql\", \"params\": {\"sql\": \"x\"}}", Strategy::R)
            .contains("unknown action \"run_sql\""));
        assert!(
            parse_action("Action: {\"action\": \"run_sql\", \"params\": {\"sql\": \"x\"}}", Strategy::Typed).is_ok()
        );
        assert!(e("Action: {\"action\": \"execute_r\", \"params\": {}}", Strategy::R)
            .contains("the string parameter \"code\""));
        assert!(e("Action: {\"action\": \"submit_answers\", \"params\": {\"answers\": {}}}", Strategy::R)
            .contains("needs \"answers\""));
    }

    #[test]
    fn the_r_strategy_has_no_table_lookups() {
        let r = action_names(Strategy::R);
        assert!(!r.contains(&"list_tables") && !r.contains(&"run_sql") && !r.contains(&"logistic_regression"));
        assert!(action_names(Strategy::Typed).contains(&"cox_regression"));
        assert!(tools_desc(Strategy::R).starts_with("list_files: Lists files and directories in a specified path."));
    }
}
