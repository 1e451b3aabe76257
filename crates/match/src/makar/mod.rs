//! MAKAR (multi-agent knowledge augmentation and reasoning): the router,
//! the augmentation agents, the critic loop, and the reasoning, matching and
//! supervision agents. Being written; see issue 4.
