//! `{name}` templates in plan values: each is replaced by the value of a matrix parameter (or
//! a derived variable such as `{bdp}`) in the cell being run. `{{` and `}}` stand for literal
//! braces. An unknown name or an unclosed brace is an error naming the variable.

/// Replaces every `{name}` in `text` by `lookup(name)`.
///
/// Errors: `Err(message)` for an unclosed `{`, a stray `}`, an empty name, or a name that
/// `lookup` does not know.
pub fn substitute(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("{{") {
            out.push('{');
            rest = t;
        } else if let Some(t) = tail.strip_prefix("}}") {
            out.push('}');
            rest = t;
        } else if tail.starts_with('}') {
            return Err(format!(
                "stray '}}' in \"{text}\" (write '}}}}' for a brace)"
            ));
        } else {
            let Some(end) = tail.find('}') else {
                return Err(format!("unclosed '{{' in \"{text}\""));
            };
            let name = tail[1..end].trim();
            if name.is_empty() {
                return Err(format!("empty '{{}}' in \"{text}\""));
            }
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("unknown variable {{{name}}} in \"{text}\"")),
            }
            rest = &tail[end + 1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The variable names used in `text` (ignoring malformed parts).
pub fn variables(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("{{") {
            rest = t;
            continue;
        }
        let Some(end) = tail.find('}') else { break };
        v.push(tail[1..end].trim().to_string());
        rest = &tail[end + 1..];
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(n: &str) -> Option<String> {
        match n {
            "rtt" => Some("50ms".into()),
            "bdp" => Some("281250".into()),
            _ => None,
        }
    }

    #[test]
    fn replaces_and_escapes() {
        assert_eq!(substitute("rtt {rtt}", &look).unwrap(), "rtt 50ms");
        assert_eq!(substitute("{bdp}{rtt}", &look).unwrap(), "28125050ms");
        assert_eq!(substitute("{{x}} {rtt}", &look).unwrap(), "{x} 50ms");
        assert_eq!(substitute("plain", &look).unwrap(), "plain");
        assert_eq!(variables("a {rtt} {{no}} {bdp}"), ["rtt", "bdp"]);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(substitute("{nope}", &look).unwrap_err().contains("{nope}"));
        assert!(substitute("{rtt", &look).unwrap_err().contains("unclosed"));
        assert!(substitute("a}b", &look).unwrap_err().contains("stray"));
        assert!(substitute("{}", &look).unwrap_err().contains("empty"));
    }
}
