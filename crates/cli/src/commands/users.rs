//! `evident users add NAME --role viewer|reviewer|admin` (the password is
//! read from stdin when it is not a terminal, else asked for twice without
//! echo) and `evident users list`: local accounts of the review service.

use std::io::{BufRead, IsTerminal};

use anyhow::bail;
use evident_app::users::{self, AddUser, Role};

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: UsersCommand,
}

#[derive(clap::Subcommand, Debug)]
enum UsersCommand {
    /// Add an account (password from stdin, or a prompt).
    Add {
        name: String,
        /// viewer (reads), reviewer (also overrides and signs off), admin (also manages users).
        #[arg(long)]
        role: String,
    },
    /// The accounts and their roles.
    List,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        UsersCommand::Add { name, role } => {
            let role = Role::parse(role)?;
            let password = read_password()?;
            let by = format!("cli:{}", std::env::var("USER").unwrap_or_else(|_| "unknown".into()));
            let added = users::add(&ctx.session, &AddUser { name: name.clone(), role, password }, &by)?;
            ctx.print(&added)?;
            Ok(Exit::Found)
        }
        UsersCommand::List => {
            let list = users::list(&ctx.session)?;
            if ctx.json {
                crate::output::print_json(&list)?;
            } else {
                for u in &list {
                    println!("{:<24} {:<9} added {}", u.name, u.role, u.created_at);
                }
            }
            Ok(Exit::found_if(!list.is_empty()))
        }
    }
}

fn read_password() -> anyhow::Result<String> {
    if !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        return Ok(line.trim_end_matches(['\r', '\n']).to_string());
    }
    let first = rpassword::prompt_password("password: ")?;
    let second = rpassword::prompt_password("again: ")?;
    if first != second {
        bail!("the two passwords differ; nothing was added");
    }
    Ok(first)
}
