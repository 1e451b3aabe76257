# Reference analysis: first-day maximum anion gap and death within 28 days of
# ICU admission (logistic regression per 1 mEq/L adjusted for age, Wald 95%
# CI; ROC AUC of the anion gap alone, pROC).
suppressPackageStartupMessages(library(pROC))
dir <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(dir, "..", "demo.R"))
demo <- args_demo_dir()
stays <- first_icu_stays(demo)
stays$anion_gap <- first_day_max(demo, stays, 50868)
cohort <- stays[!is.na(stays$anion_gap), ]
fit <- glm(death_28d ~ anion_gap + age, family = binomial, data = cohort)
co <- summary(fit)$coefficients["anion_gap", ]
or <- exp(co[["Estimate"]]); p <- co[["Pr(>|z|)"]]; ci <- exp(confint.default(fit)["anion_gap", ])
roc <- roc(cohort$death_28d, cohort$anion_gap, levels = c(0, 1), direction = "<", quiet = TRUE)
cat(sprintf("n=%d deaths28=%d OR=%.4f (%.4f-%.4f) p=%.4g AUC=%.4f\n", nrow(cohort), sum(cohort$death_28d), or, ci[1], ci[2], p, as.numeric(auc(roc))))
write_gold(args_out(), "anion-gap-28day-auc",
  choices = list(q_anion_gap = association_letter(or, p, "A", "B", "C")),
  fields = list(
    n_patients = nrow(cohort),
    n_deaths_28d = sum(cohort$death_28d),
    or_anion_gap = or, or_anion_gap_low = ci[[1]], or_anion_gap_high = ci[[2]], p_anion_gap = p,
    auc_anion_gap = as.numeric(auc(roc))
  ))
