# Reference analysis: first-day maximum RDW above 15.5% and death within one
# year of ICU admission (Kaplan-Meier with log-rank test; Cox model adjusted
# for age and sex, Efron ties, Wald 95% CI).
suppressPackageStartupMessages(library(survival))
dir <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(dir, "..", "demo.R"))
demo <- args_demo_dir()
stays <- first_icu_stays(demo)
stays$rdw <- first_day_max(demo, stays, 51277)
cohort <- stays[!is.na(stays$rdw), ]
cohort$high_rdw <- as.integer(cohort$rdw > 15.5)
lr <- survdiff(Surv(time_365d, death_365d) ~ high_rdw, data = cohort)
p_lr <- pchisq(lr$chisq, df = 1, lower.tail = FALSE)
km <- survfit(Surv(time_365d, death_365d) ~ high_rdw, data = cohort)
s1y <- summary(km, times = 365, extend = TRUE)$surv  # normal, high
fit <- coxph(Surv(time_365d, death_365d) ~ high_rdw + age + female, data = cohort, ties = "efron")
hr <- exp(coef(fit)[["high_rdw"]]); ci <- exp(confint(fit)["high_rdw", ])
p_hr <- summary(fit)$coefficients["high_rdw", "Pr(>|z|)"]
cat(sprintf("n=%d high=%d events=%d (high %d) logrank p=%.4g HR=%.4f (%.4f-%.4f) p=%.4g surv=%.3f/%.3f\n",
  nrow(cohort), sum(cohort$high_rdw), sum(cohort$death_365d), sum(cohort$death_365d[cohort$high_rdw == 1]),
  p_lr, hr, ci[1], ci[2], p_hr, s1y[1], s1y[2]))
km_letter <- if (p_lr >= 0.05) "C" else if (s1y[2] < s1y[1]) "A" else "B"
write_gold(args_out(), "rdw-one-year-survival",
  choices = list(q_km = km_letter, q_cox = association_letter(hr, p_hr, "A", "B", "C")),
  fields = list(
    n_high_rdw = sum(cohort$high_rdw),
    n_normal_rdw = sum(1 - cohort$high_rdw),
    n_deaths_1y = sum(cohort$death_365d),
    p_logrank = p_lr,
    hr_high_rdw = hr, hr_low = ci[[1]], hr_high = ci[[2]], p_cox = p_hr
  ))
