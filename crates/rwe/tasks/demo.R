# Shared helpers of the development tasks' reference analyses. They read the
# MIMIC-IV demo's csv.gz files directly (not Evident's database), so the gold
# answers do not depend on Evident's loader or derived tables.
#
# Usage from a task's reference.R:
#   source(file.path(task_dir, "..", "demo.R"))
#   demo <- args_demo_dir(); out <- args_out()
suppressPackageStartupMessages({
  library(jsonlite)
})

cli <- commandArgs(trailingOnly = TRUE)
args_demo_dir <- function() if (length(cli) >= 1) cli[[1]] else stop("usage: Rscript reference.R DEMO_DIR OUT.json")
args_out <- function() if (length(cli) >= 2) cli[[2]] else stop("usage: Rscript reference.R DEMO_DIR OUT.json")

read_table <- function(demo, path) {
  read.csv(gzfile(file.path(demo, path)), stringsAsFactors = FALSE, na.strings = "")
}

as_time <- function(x) as.POSIXct(x, tz = "UTC", format = "%Y-%m-%d %H:%M:%S")

# One row per patient: the first ICU stay (earliest intime), with age at ICU
# admission (anchor_age + year of intime - anchor_year), sex, the admission's
# in-hospital death flag, and death within 28 and 365 days of ICU admission
# (patients.dod, a date; days counted from the calendar date of intime).
first_icu_stays <- function(demo) {
  icu <- read_table(demo, "icu/icustays.csv.gz")
  pat <- read_table(demo, "hosp/patients.csv.gz")
  adm <- read_table(demo, "hosp/admissions.csv.gz")
  icu <- icu[order(icu$subject_id, as_time(icu$intime), icu$stay_id), ]
  first <- icu[!duplicated(icu$subject_id), c("subject_id", "hadm_id", "stay_id", "intime", "outtime", "los")]
  first <- merge(first, pat[, c("subject_id", "gender", "anchor_age", "anchor_year", "dod")], by = "subject_id")
  first <- merge(first, adm[, c("hadm_id", "hospital_expire_flag")], by = "hadm_id")
  first$age <- first$anchor_age + as.integer(substr(first$intime, 1, 4)) - first$anchor_year
  first$female <- as.integer(first$gender == "F")
  days <- as.numeric(as.Date(first$dod) - as.Date(substr(first$intime, 1, 10)))
  first$death_days <- days
  first$death_28d <- as.integer(!is.na(days) & days <= 28)
  first$death_365d <- as.integer(!is.na(days) & days <= 365)
  first$time_365d <- ifelse(!is.na(days) & days <= 365, days, 365)
  first <- first[first$age >= 18, ]
  first[order(first$stay_id), ]
}

# The maximum of a lab item (labevents.itemid) charted from 6 hours before to
# 24 hours after ICU admission, matched on subject_id, as mimic-code's
# first_day_lab does; NA when there is none.
first_day_max <- function(demo, stays, itemid) {
  lab <- read_table(demo, "hosp/labevents.csv.gz")
  lab <- lab[lab$itemid == itemid & !is.na(lab$valuenum), c("subject_id", "charttime", "valuenum")]
  m <- merge(stays[, c("subject_id", "stay_id", "intime")], lab, by = "subject_id")
  t <- as_time(m$charttime); t0 <- as_time(m$intime)
  m <- m[t >= t0 - 6 * 3600 & t <= t0 + 24 * 3600, ]
  if (nrow(m) == 0) return(rep(NA_real_, nrow(stays)))
  mx <- tapply(m$valuenum, m$stay_id, max)
  as.numeric(mx[as.character(stays$stay_id)])
}

# The option letter for a two-sided association: `higher` when the estimate
# is above 1 and significant, `lower` when below 1 and significant, `none`
# otherwise.
association_letter <- function(estimate, p, higher, lower, none) {
  if (p < 0.05 && estimate > 1) higher else if (p < 0.05 && estimate < 1) lower else none
}

write_gold <- function(out, task, choices, fields) {
  gold <- list(
    task = task,
    produced_by = sprintf("crates/rwe/tasks/%s/reference.R (%s)", task, R.version.string),
    choices = choices,
    fields = fields
  )
  writeLines(toJSON(gold, auto_unbox = TRUE, digits = NA, pretty = TRUE), out)
}
