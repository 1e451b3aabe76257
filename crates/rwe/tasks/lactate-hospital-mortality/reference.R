# Reference analysis: first-day maximum lactate and in-hospital mortality
# (logistic regression adjusted for age and sex; Wald 95% CI).
dir <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(dir, "..", "demo.R"))
demo <- args_demo_dir()
stays <- first_icu_stays(demo)
stays$lactate <- first_day_max(demo, stays, 50813)
cohort <- stays[!is.na(stays$lactate), ]
fit <- glm(hospital_expire_flag ~ lactate + age + female, family = binomial, data = cohort)
co <- summary(fit)$coefficients["lactate", ]
ci <- exp(confint.default(fit)["lactate", ])
or <- exp(co[["Estimate"]]); p <- co[["Pr(>|z|)"]]
cat(sprintf("n=%d deaths=%d OR=%.4f (%.4f-%.4f) p=%.4g\n", nrow(cohort), sum(cohort$hospital_expire_flag), or, ci[1], ci[2], p))
write_gold(args_out(), "lactate-hospital-mortality",
  choices = list(q_lactate = association_letter(or, p, "A", "B", "C")),
  fields = list(
    n_patients = nrow(cohort),
    n_deaths = sum(cohort$hospital_expire_flag),
    median_lactate = median(cohort$lactate),
    or_lactate = or, or_lactate_low = ci[[1]], or_lactate_high = ci[[2]], p_lactate = p
  ))
