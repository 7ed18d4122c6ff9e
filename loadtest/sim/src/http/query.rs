//! Query strings as the apiserver reads them: `&`-separated, percent-decoded, empty pairs skipped
//! (kube-rs sends `?&watch=true…`).

use percent_encoding::percent_decode_str;

#[derive(Debug, Default, Clone)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect();
        Self { pairs }
    }

    /// Forgets every value of `key`.
    pub fn remove(&mut self, key: &str) {
        self.pairs.retain(|(k, _)| k != key);
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A non-empty value of `key`.
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// `true`/`1` as Go's strconv.ParseBool accepts them.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "t" | "T" | "TRUE" | "True"))
    }

    pub fn int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.non_empty(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| format!("invalid value for {key}: {v:?}")),
        }
    }
}

fn decode(s: &str) -> String {
    let plus_as_space = s.replace('+', " ");
    percent_decode_str(&plus_as_space).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_rs_leading_ampersand_and_encoded_selectors() {
        let q = Query::parse(Some("&watch=true&labelSelector=app%3Dx%2Ctier+in+%28a%29&timeoutSeconds=290"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("labelSelector"), Some("app=x,tier in (a)"));
        assert_eq!(q.int("timeoutSeconds"), Ok(Some(290)));
        assert!(q.int("watch").is_err());
    }
}
