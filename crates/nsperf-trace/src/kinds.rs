//! The closed sets the analysis names in its result: a connection's direction, what limited a
//! sender, and where the capture was taken.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Data sent by side a.
    #[default]
    AToB,
    /// Data sent by side b.
    BToA,
}

impl Direction {
    /// The index of the sending half: 0 for a, 1 for b.
    pub fn index(self) -> usize {
        match self {
            Direction::AToB => 0,
            Direction::BToA => 1,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::AToB => "a_to_b",
            Direction::BToA => "b_to_a",
        })
    }
}

/// What limited a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The receiver's advertised window was full, or zero (a slow reader).
    ReceiverWindow,
    /// Recovering from loss, or a congestion window kept small by loss.
    Loss,
    /// Room in the receiver window left unused while data was outstanding: the congestion
    /// window, i.e. the path.
    Congestion,
    /// The sender had room and nothing to send: the application (or a shaper or CPU on the
    /// sending host).
    Application,
    /// The raw window was full but its scale was not captured.
    WindowUnknown,
    /// Too few segments or round trips to say.
    TooShort,
    /// No data in either direction.
    #[default]
    None,
}

impl Limit {
    /// Every limit, in the order of the shares.
    pub const ALL: [Limit; 7] = [
        Limit::ReceiverWindow,
        Limit::Loss,
        Limit::Congestion,
        Limit::Application,
        Limit::WindowUnknown,
        Limit::TooShort,
        Limit::None,
    ];

    /// True when the limit is a verdict about the connection (not "too short" or "none").
    pub fn is_verdict(self) -> bool {
        !matches!(self, Limit::TooShort | Limit::None)
    }
}

/// The stable name (serde's, as in JSON); pads to a width.
impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Limit::ReceiverWindow => "receiver_window",
            Limit::Loss => "loss",
            Limit::Congestion => "congestion",
            Limit::Application => "application",
            Limit::WindowUnknown => "window_unknown",
            Limit::TooShort => "too_short",
            Limit::None => "none",
        })
    }
}

impl FromStr for Limit {
    type Err = String;
    fn from_str(s: &str) -> Result<Limit, String> {
        Limit::ALL
            .into_iter()
            .find(|l| l.to_string() == s)
            .ok_or_else(|| format!("unknown limit '{s}'"))
    }
}

/// Where along the path the capture was taken, relative to the data sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vantage {
    /// Next to the sender: ACKs reach the capture point and the sender at once.
    Sender,
    /// Next to the receiver: data reaches the capture point and the receiver at once.
    Receiver,
    /// Somewhere between.
    Middle,
    /// Not enough round trips measured to say.
    #[default]
    Unknown,
}

impl fmt::Display for Vantage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Vantage::Sender => "sender",
            Vantage::Receiver => "receiver",
            Vantage::Middle => "middle",
            Vantage::Unknown => "unknown",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_names_match_display_and_from_str() {
        let names = [
            (Limit::ReceiverWindow, "receiver_window"),
            (Limit::Loss, "loss"),
            (Limit::Congestion, "congestion"),
            (Limit::Application, "application"),
            (Limit::WindowUnknown, "window_unknown"),
            (Limit::TooShort, "too_short"),
            (Limit::None, "none"),
        ];
        assert_eq!(names.map(|(l, _)| l), Limit::ALL);
        for (l, name) in names {
            assert_eq!(l.to_string(), name);
            assert_eq!(name.parse::<Limit>(), Ok(l));
            assert_eq!(serde_json::to_string(&l).unwrap(), format!("\"{name}\""));
            assert_eq!(
                format!("{l:>16}|{l:<16}|"),
                format!("{name:>16}|{name:<16}|")
            );
        }
        assert_eq!(
            "slow".parse::<Limit>().unwrap_err().to_string(),
            "unknown limit 'slow'"
        );
    }
}
