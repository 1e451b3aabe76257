# Reference analysis: baseline characteristics of adults at their first ICU
# stay, and in-hospital mortality by age group (65 or older against younger;
# Fisher's exact test, two-sided).
dir <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(dir, "..", "demo.R"))
demo <- args_demo_dir()
cohort <- first_icu_stays(demo)
cohort$older <- as.integer(cohort$age >= 65)
tab <- table(factor(cohort$older, levels = c(1, 0)), factor(cohort$hospital_expire_flag, levels = c(1, 0)))
ft <- fisher.test(tab)
mort_older <- 100 * mean(cohort$hospital_expire_flag[cohort$older == 1])
mort_younger <- 100 * mean(cohort$hospital_expire_flag[cohort$older == 0])
cat(sprintf("n=%d female=%d older=%d deaths=%d mort %.2f vs %.2f fisher p=%.4g OR=%.3f\n", nrow(cohort),
  sum(cohort$female), sum(cohort$older), sum(cohort$hospital_expire_flag), mort_older, mort_younger, ft$p.value, ft$estimate))
letter <- if (ft$p.value >= 0.05) "C" else if (mort_older > mort_younger) "A" else "B"
write_gold(args_out(), "age-baseline-mortality",
  choices = list(q_age = letter),
  fields = list(
    n_patients = nrow(cohort),
    n_female = sum(cohort$female),
    pct_female = 100 * mean(cohort$female),
    median_age = median(cohort$age),
    n_older = sum(cohort$older),
    n_deaths = sum(cohort$hospital_expire_flag),
    mortality_older_pct = mort_older, mortality_younger_pct = mort_younger, p_fisher = ft$p.value
  ))
