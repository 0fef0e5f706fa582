import ChainwatchCore
import Crypto
